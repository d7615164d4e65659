"""Explicitly discarding a run's failed attempts: ``tenure discard``.

``tenure gc`` never removes unmerged work. A rejected attempt's branch is exactly that
(kept for autopsy), so throwing it away is a decision the operator makes per run or task,
after seeing the list. What ``status.yml`` on the integration branch says decides what
may go: an attempt that was rejected, interrupted, conflicted or cancelled, or the last
attempt of a task that needs the operator or was dropped. Never the integration branch,
a running attempt, an accepted one waiting to be merged, or a merged one (gc's job).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tenure.executors import git
from tenure.protocol.clip import clip
from tenure.protocol.errors import ConfigError
from tenure.roles.coding.files import ACCEPTED, RUNNING, RUNS_DIR, StatusRow, parse_status


@dataclass(frozen=True)
class Discard:
    task: str
    attempt: int
    branch: str
    path: Path | None  # its worktree, when it still has one
    removable: bool
    reason: str


def plan_discard(root: Path, run_id: str, task: str | None = None) -> list[Discard]:
    """Every attempt branch of the run (or of one task), and whether it may be discarded."""
    integration = f"tenure/{run_id}/integration"
    if not git.branch_exists(root, integration):
        raise ConfigError(f"no run {run_id!r} in {root} (no branch {integration})")
    status = f"{integration}:{(RUNS_DIR / run_id).as_posix()}/status.yml"
    rows = parse_status(git.git(root, "show", status, check=False))
    if task is not None and task not in rows:
        known = ", ".join(list(rows)[:10]) or "none"
        raise ConfigError(f"run {run_id} has no task {task!r} (tasks: {known})")
    trees = {b: p for p, b in git.worktrees(root).items() if b}
    refs = git.git(
        root, "for-each-ref", "--format=%(refname:short)", f"refs/heads/tenure/{run_id}/"
    )
    found: list[Discard] = []
    for branch in refs.split():
        parts = branch.split("/")
        if len(parts) != 4 or not parts[3].isdigit():
            continue  # the integration branch (and anything not an attempt) is never listed
        task_id, number = parts[2], int(parts[3])
        if task is not None and task_id != task:
            continue
        removable, reason = _verdict(root, integration, branch, number, rows.get(task_id))
        found.append(Discard(task_id, number, branch, trees.get(branch), removable, reason))
    return sorted(found, key=lambda d: (d.task, d.attempt))


def _verdict(
    root: Path, integration: str, branch: str, number: int, row: StatusRow | None
) -> tuple[bool, str]:
    if row is None:
        return False, "its task is not in the run's status.yml"
    if number > row.attempt:
        return False, f"status.yml knows only {row.attempt} attempt(s) of {row.id}"
    if number == row.attempt and row.state == RUNNING:
        return False, "running"
    if number == row.attempt and row.state == ACCEPTED:
        return False, "accepted, waiting to be merged"
    if git.is_ancestor(root, branch, integration) or row.merged_branch == branch:
        return False, "merged into the integration branch (tenure gc removes it)"
    said = next((h for h in row.history if h.startswith(f"attempt {number}:")), "")
    why = said.partition(":")[2].strip() or row.reason or row.state
    return True, clip(f"attempt {number} failed: {why}", 200)
