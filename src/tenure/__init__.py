"""Tenure: leader/follower teams of AI agents that survive their own failures.

Everything a program needs is here, so it never depends on where a name lives
inside the package (those modules may move; these names stay)::

    import tenure

    plan = tenure.load_plan("plan.yaml")
    result = tenure.Team(plan, executor=my_function).run()
    if not result.ok:
        ...  # result.outcome is "blocked", "failed" or "stopped": see tenure.inbox

- a local run: ``Team``, ``RunResult``, ``TaskOutcome``;
- plans: ``Plan``, ``PlanTask``, ``load_plan``, ``parse_plan``;
- stores: ``open_store`` (``sqlite:///path``, ``redis://host:port/db``, ``memory://``),
  ``Store``;
- reading a store: ``tasks``, ``results``, ``decisions``, ``Task``; the operator's side:
  ``inbox``, ``answer``, ``cancel``;
- members in processes of their own: ``Leader``, ``LeaderConfig``, ``Follower``,
  ``FollowerConfig``, ``QueueWorker``, ``enqueue_plan``, ``LeaseTiming``;
- doing the work: ``Executor``, ``TaskContext``, ``TaskEnvelope``, ``TaskResult``,
  ``PythonExecutor``, ``CommandExecutor``, ``ScriptedExecutor``, ``resolve_executor``,
  ``make_result``, ``failed``;
- models: ``LLMExecutor``, ``Model``, ``ChatMessage``, ``ScriptedModel``, ``open_model``,
  ``Planner``, ``Splitter``, ``artifacts_from``, ``Trust``;
- leader hooks: ``LeaderHook``, ``LeaderContext`` and what they answer with (``GO``,
  ``HOLD``, ``Stop``, ``Dispatch``, ``Review``), a task's ``AttemptData``;
- coding-agent teams: ``CodingLeader``, ``CodingConfig``, ``CodingOutcome``, ``AgentCLI``;
- errors: ``TenureError`` and ``ProtocolError``, ``ConfigError``, ``StoreError``,
  ``StoreUnavailable``, ``StaleEpoch``, ``LeaseLost``, ``Conflict``, ``NotFound``,
  ``ModelError``.

See docs/python-api.md.
"""

from tenure.coord import LeaseTiming
from tenure.executors import (
    CommandExecutor,
    Executor,
    PythonExecutor,
    ScriptedExecutor,
    TaskContext,
    failed,
    make_result,
    resolve_executor,
)
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.llm import LLMExecutor
from tenure.models import ChatMessage, Model, ModelError, ScriptedModel, open_model
from tenure.protocol import (
    ConfigError,
    Conflict,
    LeaseLost,
    NotFound,
    Plan,
    PlanTask,
    ProtocolError,
    StaleEpoch,
    StoreError,
    StoreUnavailable,
    TaskEnvelope,
    TaskResult,
    TenureError,
    load_plan,
    parse_plan,
)
from tenure.protocol.taskspec import AttemptData
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome
from tenure.roles.features import Splitter
from tenure.roles.leader import (
    GO,
    HOLD,
    Dispatch,
    LeaderConfig,
    LeaderContext,
    LeaderHook,
    Review,
    Stop,
)
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.planning import Planner, artifacts_from
from tenure.roles.register import Task
from tenure.roles.teams import Leader, QueueWorker, RunResult, TaskOutcome, Team, enqueue_plan
from tenure.roles.teams.inbox import answer, cancel, inbox
from tenure.roles.teams.reading import decisions, results, tasks
from tenure.store import Store, open_store
from tenure.verify import Trust


def _version() -> str:
    """The installed distribution's version; in a source tree without one, pyproject's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tenure")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()

__all__ = [
    "GO",
    "HOLD",
    "AgentCLI",
    "AttemptData",
    "ChatMessage",
    "CodingConfig",
    "CodingLeader",
    "CodingOutcome",
    "CommandExecutor",
    "ConfigError",
    "Conflict",
    "Dispatch",
    "Executor",
    "Follower",
    "FollowerConfig",
    "LLMExecutor",
    "Leader",
    "LeaderConfig",
    "LeaderContext",
    "LeaderHook",
    "LeaseLost",
    "LeaseTiming",
    "Model",
    "ModelError",
    "NotFound",
    "Plan",
    "PlanTask",
    "Planner",
    "ProtocolError",
    "PythonExecutor",
    "QueueWorker",
    "Review",
    "RunResult",
    "ScriptedExecutor",
    "ScriptedModel",
    "Splitter",
    "StaleEpoch",
    "Stop",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Task",
    "TaskContext",
    "TaskEnvelope",
    "TaskOutcome",
    "TaskResult",
    "Team",
    "TenureError",
    "Trust",
    "answer",
    "artifacts_from",
    "cancel",
    "decisions",
    "enqueue_plan",
    "failed",
    "inbox",
    "load_plan",
    "make_result",
    "open_model",
    "open_store",
    "parse_plan",
    "resolve_executor",
    "results",
    "tasks",
]
