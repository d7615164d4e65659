"""``status.yml`` as a projection of the register: one row per task, derived.

The register is the run's state; a row is what it says about one task in the
words of the coding contract. What the register cannot say by itself (which
worker had the last attempt, the commit it started from, what the task file and
the results file already hold) the leader keeps in the task's data under
``hooks["coding"]`` (``CodingNotes``).

==================  ========================================================
status.yml          register
==================  ========================================================
``pending``         ``queued``
``running``         ``running`` (or ``queued`` with an assignee: dispatched)
``accepted``        ``review``, checks passed, waiting to merge in plan order
``merged``          ``done``
``needs-operator``  ``blocked`` or ``failed``: in ``tenure inbox``
``blocked``         ``queued`` behind a task that needs the operator
``split``           a task split into parts (``data.split_into``)
``cancelled``       ``cancelled`` (by the operator, or by a replan)
``dropped``         ``cancelled``: a replan left it out
==================  ========================================================
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from tenure.protocol.clip import clip, first_line
from tenure.protocol.taskspec import AttemptData
from tenure.roles.coding.files import (
    ACCEPTED,
    BLOCKED,
    CANCELLED,
    DROPPED,
    MERGED,
    NEEDS_OPERATOR,
    PENDING,
    RUNNING,
    SPLIT,
    StatusRow,
)
from tenure.roles.register import Task

NOTES = "coding"


class CodingNotes(BaseModel):
    """What a coding task's data holds beyond the register's own fields."""

    model_config = ConfigDict(extra="forbid")

    worker: str = ""  # the member of the last attempt
    base: str = ""  # the integration commit the last attempt started from
    started_at: str = ""
    merged_branch: str = ""
    checked: str = ""  # the commit the leader's checks passed on: what is merged
    noted: int = 0  # history entries written into the task file
    reported: int = 0  # the last attempt whose report is in results/TASK.md
    dispatched: int = 0  # the last attempt whose dispatch is committed

    @classmethod
    def of(cls, data: AttemptData) -> CodingNotes:
        return cls.model_validate(data.hooks.get(NOTES, {}))

    def into(self, data: AttemptData) -> AttemptData:
        return data.with_(hooks={**data.hooks, NOTES: self.model_dump()})


def iso(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def branch_for(run: str, task_id: str, attempt: int) -> str:
    return f"tenure/{run}/{task_id}/{attempt}" if attempt >= 1 else ""


def state_of(task: Task, by_id: dict[str, Task]) -> str:
    """The task's status.yml state, from the register."""
    data = task.data
    if task.state in ("blocked", "failed"):
        return NEEDS_OPERATOR
    if data.split_into:
        return SPLIT
    if task.state == "done":
        return MERGED
    if task.state == "cancelled":
        return DROPPED if data.coding_state == DROPPED else CANCELLED
    if task.state == "review":
        return ACCEPTED if data.coding_state == ACCEPTED else RUNNING
    if task.state == "running" or task.assignee:
        return RUNNING
    return BLOCKED if _stuck_behind(task, by_id) else PENDING


def _stuck_behind(task: Task, by_id: dict[str, Task], seen: frozenset[str] = frozenset()) -> bool:
    for dep in task.spec.depends_on:
        other = by_id.get(dep)
        if other is None or dep in seen:
            continue
        if other.state in ("blocked", "failed"):
            return True
        if other.state == "queued" and _stuck_behind(other, by_id, seen | {task.task_id}):
            return True
    return False


def history_of(task: Task) -> list[str]:
    lines = [clip(f"attempt {h.attempt}: {first_line(h.failure)}", 250) for h in task.data.history]
    lines += [clip(f"answered by the operator: {a.answer}", 250) for a in task.data.qa]
    return lines


def reason_of(task: Task, state: str, by_id: dict[str, Task]) -> str:
    if state == BLOCKED:
        stuck = [
            d
            for d in task.spec.depends_on
            if d in by_id and state_of(by_id[d], by_id) in (NEEDS_OPERATOR, BLOCKED)
        ]
        return f"depends on {', '.join(stuck)}, which needs the operator"
    if state == CANCELLED and task.data.coding_state != CANCELLED:
        return f"cancelled by the operator: {task.reason or 'no reason given'}"
    if state == DROPPED:
        return "not in the new plan"
    if state in (MERGED, ACCEPTED):
        return ""
    return task.reason


def row_of(run: str, task: Task, by_id: dict[str, Task]) -> StatusRow:
    notes = CodingNotes.of(task.data)
    state = state_of(task, by_id)
    return StatusRow(
        id=task.task_id,
        state=state,
        attempt=task.attempt,
        worker=task.assignee or notes.worker,
        branch=branch_for(run, task.task_id, task.attempt),
        base=notes.base,
        started_at=notes.started_at,
        updated_at=iso(task.updated_at),
        reason=reason_of(task, state, by_id),
        merged_branch=notes.merged_branch,
        replanned_at_attempt=task.data.attempt_base,
        split_of=task.spec.split_of or "",
        history=history_of(task),
    )


def rows_of(run: str, tasks: list[Task]) -> dict[str, StatusRow]:
    by_id = {t.task_id: t for t in tasks}
    return {t.task_id: row_of(run, t, by_id) for t in tasks if not t.spec.replica_of}
