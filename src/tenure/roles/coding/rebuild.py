"""A lost state database rebuilt from git: every ``status.yml`` row back in the register.

``status.yml`` on the integration branch is committed with every change, so a
store that lost the run (a deleted SQLite file, an emptied Redis) is rebuilt
from it: each task registered from the run's own ``plan.md`` and moved through
the register's own transitions to the state its row says, with its attempt,
worker and failures. What is lost with the store: the old event log, and
answers the leader had not yet copied into a task file.
"""

from __future__ import annotations

import re

from tenure.protocol import Plan
from tenure.protocol.envelope import PriorAttempt
from tenure.protocol.taskspec import AttemptData, spec_for
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
from tenure.roles.coding.lease import route
from tenure.roles.coding.rows import CodingNotes
from tenure.roles.register import Register
from tenure.store import TaskState

REGISTER_STATE: dict[str, TaskState] = {
    PENDING: "queued",
    BLOCKED: "queued",
    SPLIT: "queued",
    RUNNING: "running",
    ACCEPTED: "review",
    MERGED: "done",
    NEEDS_OPERATOR: "blocked",
    CANCELLED: "cancelled",
    DROPPED: "cancelled",
}
_ATTEMPT = re.compile(r"attempt (\d+): (.*)", re.S)


def rebuild(register: Register, plan: Plan, rows: dict[str, StatusRow]) -> int:
    """Register every task of ``plan`` in the state ``rows`` says; returns how many."""
    parts: dict[str, list[str]] = {}
    for row in rows.values():
        if row.split_of:
            parts.setdefault(row.split_of, []).append(row.id)
    for task in plan.tasks:
        row = rows.get(task.id) or StatusRow(task.id)
        spec = spec_for(plan, task).model_copy(update={"split_of": row.split_of or None})
        record = register.create(task.id, spec)
        target = REGISTER_STATE.get(row.state, "queued")
        data = _data(row, parts.get(task.id, []))
        steps = route(record.state, target) if target != record.state else [target]
        for n, step in enumerate(steps):
            last = n == len(steps) - 1
            fields = _fields(row, data, target) if last else {}
            record = register.move(record, step, **fields)  # type: ignore[arg-type]
    return len(plan.tasks)


def _data(row: StatusRow, split_into: list[str]) -> AttemptData:
    history = []
    for line in row.history:
        match = _ATTEMPT.match(line)
        if match:
            history.append(PriorAttempt(attempt=int(match[1]), status="failed", failure=match[2]))
    notes = CodingNotes(
        worker=row.worker,
        base=row.base,
        started_at=row.started_at,
        merged_branch=row.merged_branch,
        noted=len(history),
        reported=row.attempt,
        dispatched=row.attempt,
    )
    data = AttemptData(
        history=history,
        attempt_base=row.replanned_at_attempt,
        split_into=split_into,
        coding_state=row.state,
        branch=row.branch or None,
        question=row.reason if row.state == NEEDS_OPERATOR else None,
    )
    return notes.into(data)


def _fields(row: StatusRow, data: AttemptData, target: TaskState) -> dict[str, object]:
    return {
        "attempt": row.attempt,
        "assignee": (row.worker or None) if target == "running" else None,
        "reason": row.reason,
        "data": data,
    }
