"""A coding run's input and outcome, and the preflight that refuses bad input."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tenure.executors import git
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.worktrees import exclude_tenure_dir
from tenure.protocol import Plan, PlanTask
from tenure.protocol.errors import ConfigError
from tenure.protocol.ids import check_task_id
from tenure.roles.coding.scope import check_tasks
from tenure.roles.leader import LeaderHook
from tenure.roles.member.mcp.sdk import server_class
from tenure.roles.teams.result import RunResult
from tenure.verify import Trust
from tenure.verify.checks import Verdict


@dataclass
class CodingConfig:
    repo: Path
    plan: Plan
    agent: AgentCLI
    workers: int = 2
    run_id: str | None = None  # None: a new run named after the time
    port_first: int = 20000
    check_installed: bool = True
    # split(task, failures) -> parts, tried once before the inbox (see coding.split)
    splitter: Callable[[PlanTask, list[str]], list[PlanTask]] | None = None
    # the run's state database (see coding.register); None: REPO/.tenure/state.db
    store_url: str | None = None
    lease_ttl: float = 10.0  # seconds; the leader renews it every ttl * 0.3
    trust: Trust | None = None  # judge models for judge checks on the results
    hooks: Sequence[LeaderHook] = ()  # the caller's own leader hooks
    # the agent reports over its attempt's MCP server, not a result file (--agent-mcp)
    agent_mcp: bool = False


@dataclass
class CodingOutcome:
    """How a coding run ended. ``done``: every task merged and the final checks pass
    together; ``states``: each task's row in ``status.yml``; ``result``: the run as its
    register holds it, as ``Team.run()`` returns it (``outcome``, the done, blocked and
    failed counts, each task's state, attempts, reason and question)."""

    run: str
    done: bool
    integration_branch: str
    integration_worktree: Path
    states: dict[str, str]
    reason: str = ""
    final_checks: list[Verdict] = field(default_factory=list)
    result: RunResult = field(default_factory=lambda: RunResult("", "stopped", {}))


def new_run_id() -> str:
    return "run-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def preflight(config: CodingConfig) -> Path:
    """Refuse bad input before any worktree exists; return the repository root."""
    root = git.repo_root(config.repo)
    if config.run_id is not None:
        check_task_id(config.run_id, "run")
    integration = f"tenure/{config.run_id}/integration" if config.run_id else ""
    resuming = bool(integration) and git.branch_exists(root, integration)
    exclude_tenure_dir(root)  # before the guard's baseline; a no-op once done
    if not resuming:
        git.require_clean(root)
        if not git.ok(root, "rev-parse", "--verify", "HEAD"):
            raise ConfigError(f"{root} has no commit yet; commit something first")
    if config.check_installed:
        config.agent.check_installed()
    if config.agent_mcp or config.agent.mcp:
        config.agent.with_mcp()  # refuses a CLI without an MCP client, or --share-home
        server_class()  # the MCP SDK (an extra), or one line saying how to get it
    config.agent.sandboxed()  # refuses a sandbox that is required and missing
    if config.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {config.workers}")
    if config.lease_ttl <= 0:
        raise ConfigError(f"--lease-ttl must be positive, got {config.lease_ttl:g}")
    check_tasks(root, config.plan)
    return root
