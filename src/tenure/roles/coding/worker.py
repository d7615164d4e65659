"""The worker's side of a coding team: one attempt of an agent CLI in a worktree of its own.

``WorktreeAgent`` is an ordinary executor: a follower runs it through the attempt
runner like any other, under the attempt's idempotency key. It creates the
attempt's worktree and branch ``tenure/RUN/TASK/N`` at the integration commit the
leader dispatched from (``input.base``), runs the agent there with its task file,
a port block and a database name of its own, and commits whatever the agent left,
also after a failure or a kill, so no attempt's work is lost. Its result carries
the agent's report; what the change is worth is decided by the leader's checks,
never by the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenure.executors import TaskContext, failed, make_result
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.containment import Guard, UnsafeFile, read_beneath
from tenure.executors.worktrees import TENURE_DIR, Worktrees
from tenure.protocol import TaskEnvelope, TaskResult, TenureError

REPORT_LIMIT = 64 * 1024  # characters of the agent's report that travel in the result
LOG_TAIL = 2000


def attempts_dir(root: Path, run: str) -> Path:
    """Where a run's per-attempt logs, agent homes and pid files live (never committed)."""
    return root / TENURE_DIR / "attempts" / run


def result_file(worktree: Path, task_id: str) -> Path:
    return worktree / TENURE_DIR / f"result-{task_id}.md"


@dataclass
class WorktreeAgent:
    """Runs one coding attempt; ``slot`` picks the port block (one per worker)."""

    root: Path
    run: str
    agent: AgentCLI
    slot: int
    port_first: int = 20000
    guard: Guard | None = None  # undoes what the agent may not change, before any commit

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        base = str(envelope.input.get("base", ""))
        task_file = str(envelope.input.get("task_file", ""))
        if not base or not task_file:
            return failed(envelope, "the envelope names no base commit or task file")
        trees = Worktrees(self.root, self.run, port_first=self.port_first)
        try:
            tree = trees.create(envelope.task_id, envelope.attempt, base, self.slot)
        except TenureError as exc:
            return failed(envelope, f"cannot create the attempt's worktree: {exc}")
        report_path = result_file(tree.path, envelope.task_id)
        run = self.agent.run(
            worktree=tree.path,
            task_file=tree.path / task_file,
            result_file=report_path,
            attempt_dir=attempts_dir(self.root, self.run) / f"{envelope.task_id}-{envelope.attempt}",
            deadline_seconds=envelope.deadline_seconds,
            extra_env={
                **tree.env(),
                "TENURE_TASK_ID": envelope.task_id,
                "TENURE_ATTEMPT": str(envelope.attempt),
                "TENURE_RUN": self.run,
            },
            commit_message=f"tenure: {envelope.task_id} attempt {envelope.attempt} ({self.agent.name})",
            cancel=ctx.cancelled,
            dirs=tree.dirs,
            branch=tree.branch,
            protect=[self.root, tree.dirs.common_dir],
            before_commit=self.guard.after_agent if self.guard is not None else None,
        )
        report, refused = self._read(report_path, REPORT_LIMIT)
        artifact: dict[str, Any] = {
            "branch": tree.branch,
            "base": tree.base,
            "report": report,
            "agent": {
                "exit_code": run.exit_code,
                "seconds": round(run.seconds, 3),
                "log": str(run.log),
                "committed": run.committed,
                "sandboxed": run.sandboxed,
            },
        }
        reason = run.reason or refused
        if reason:
            tail = self._read(run.log, 1 << 20)[0][-LOG_TAIL:]
            result = failed(envelope, reason, output=tail or reason)
            return result.model_copy(update={"artifact": artifact})
        return make_result(envelope, "completed", artifact=artifact)

    def _read(self, path: Path, limit: int) -> tuple[str, str]:
        """A file an agent could have replaced, read without following links: its text,
        and why it was refused ("" when it was read, or is missing)."""
        try:
            return read_beneath(self.root, path.relative_to(self.root), limit), ""
        except UnsafeFile as exc:
            return "", f"refused the report file: {exc}"
        except (OSError, ValueError):
            return "", ""
