"""One attempt, on a worker thread: the agent in its own worktree, then acceptance by the
leader itself: the agent stayed on its branch, changed only files in the task's scope, and
every command check passes in that worktree."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from tenure.executors import git
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.worktrees import TENURE_DIR, Worktree
from tenure.protocol import CommandCheck, PlanTask
from tenure.roles.coding.files import RunFolder
from tenure.roles.coding.scope import in_scope
from tenure.verify.checks import check_command


@dataclass
class Attempt:
    task: PlanTask
    number: int
    worktree: Worktree
    slot: int


@dataclass
class AttemptReturn:
    attempt: Attempt
    accepted: bool
    reason: str
    report: str
    verdicts: str


def run_attempt(
    attempt: Attempt,
    agent: AgentCLI,
    folder: RunFolder,
    attempts_dir: Path,
    run_id: str,
    cancel: threading.Event | None,
) -> AttemptReturn:
    """One attempt, on a worker thread: the agent, then the leader's own checks."""
    task, tree = attempt.task, attempt.worktree
    result_file = tree.path / TENURE_DIR / f"result-{task.id}.md"
    run = agent.run(
        worktree=tree.path,
        task_file=folder.task_file(task.id, tree.path),
        result_file=result_file,
        attempt_dir=attempts_dir / f"{task.id}-{attempt.number}",
        deadline_seconds=task.deadline_seconds,
        extra_env={
            **tree.env(),
            "TENURE_TASK_ID": task.id,
            "TENURE_ATTEMPT": str(attempt.number),
            "TENURE_RUN": run_id,
        },
        commit_message=f"tenure: {task.id} attempt {attempt.number} ({agent.name})",
        cancel=cancel,
    )
    report = result_file.read_text() if result_file.exists() else ""
    lines = [f"- agent: exit {run.exit_code}, {run.seconds:.1f}s, log {run.log}"]
    if run.reason:
        lines.append(f"- rejected: {run.reason}")
        tail = run.log.read_text(errors="replace")[-2000:] if run.log.exists() else ""
        return AttemptReturn(attempt, False, f"{run.reason}\n{tail}", report, "\n".join(lines))
    on = git.current_branch(tree.path)
    if on != tree.branch:  # what is checked and what is merged must be the same commit
        reason = f"the agent left its branch {tree.branch} (the worktree is on {on})"
        lines.append(f"- rejected: {reason}")
        return AttemptReturn(attempt, False, reason, report, "\n".join(lines))
    changed = git.changed_files(tree.path, tree.base, tree.branch)
    outside = [p for p in changed if not in_scope(p, task.scope)]
    if outside:
        reason = (
            f"change touches files outside the task's scope ({', '.join(task.scope)}): "
            + ", ".join(outside)
        )
        lines.append(f"- rejected: {reason}")
        return AttemptReturn(attempt, False, reason, report, "\n".join(lines))
    if not changed:
        lines.append("- note: the agent changed nothing")
    failures = []
    for check in task.checks:
        if not isinstance(check, CommandCheck):
            continue
        verdict = check_command(check, tree.path)
        mark = "passed" if verdict.passed else "FAILED"
        lines.append(f"- `{check.run}`: {mark}")
        if not verdict.passed:
            failures.append(verdict.reason)
    if failures:
        return AttemptReturn(attempt, False, "\n".join(failures), report, "\n".join(lines))
    return AttemptReturn(attempt, True, "", report, "\n".join(lines))
