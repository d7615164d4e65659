"""Finished tasks whose record the team did not write: marked in the ledger.

A ``done`` or ``cancelled`` record is final in the store, so a leader that finds one
whose seal it refuses cannot put it right in the register. It sets it aside instead:
its dependents never start on it, and it records a mark in the idempotency ledger
(``tampered:<n>``, one entry per finding, never trimmed) so that every reader without
the team's keys — ``tenure status``, ``inbox``, the run's exit status — says so too.
A mark names the record's version and creation time: it applies to that record only,
not to the task a fresh start registers again under the same id.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from tenure.protocol import TenureError
from tenure.protocol.errors import EffectInProgress
from tenure.roles.register.seal import Refusal
from tenure.roles.register.task import Task, tampered
from tenure.store import Store

__all__ = ["Mark", "apply_marks", "mark", "marks"]

PREFIX = "tampered:"
MAX_MARKS = 10_000  # findings past this many are not looked for
CLAIM_SECONDS = 30.0


class Mark(BaseModel):
    """One finding: which record, who its seal claims wrote it, why it was refused."""

    task_id: str
    version: int
    created: float
    state: str
    claimed: str
    reason: str


def marks(store: Store, team: str) -> list[Mark]:
    """Every mark of ``team``, oldest first (one ledger read when there is none)."""
    found = []
    for number in range(1, MAX_MARKS + 1):
        entry = store.effect_lookup(team, f"{PREFIX}{number}")
        if entry is None:
            break
        try:
            found.append(Mark.model_validate(entry.result))
        except ValidationError:
            continue
    return found


def mark(store: Store, team: str, task: Task, *, epoch: int, holder: str) -> bool:
    """Record that ``task`` (its record as read) is set aside; False if it already was."""
    assert task.tamper is not None
    entry = Mark(
        task_id=task.task_id,
        version=task.version,
        created=task.created_at,
        state=task.state,
        claimed=task.tamper.claimed,
        reason=task.tamper.reason,
    )
    for number in range(1, MAX_MARKS + 1):
        key = f"{PREFIX}{number}"
        held = store.effect_lookup(team, key)
        if held is not None:
            if _same(held.result, entry):
                return False
            continue
        try:
            ticket = store.effect_begin(
                team, key, epoch=epoch, holder=holder, claim_seconds=CLAIM_SECONDS
            )
        except EffectInProgress:
            continue  # another leader is writing this one
        if ticket.status == "done":
            if _same(ticket.result, entry):
                return False
            continue
        store.effect_finish(team, key, holder=holder, result=entry.model_dump())
        return True
    return False


def apply_marks(store: Store, team: str, tasks: list[Task]) -> list[Task]:
    """``tasks`` with each one a mark names read as tampered (never as done)."""
    try:
        found = marks(store, team)
    except TenureError:
        return tasks
    if not found:
        return tasks
    by_record = {(m.task_id, m.version, m.created): m for m in found}
    return [
        _marked(task, by_record.get((task.task_id, task.version, task.created_at)))
        for task in tasks
    ]


def _marked(task: Task, found: Mark | None) -> Task:
    if found is None or task.tamper is not None:
        return task
    return tampered(task.record, task.spec, task.data, Refusal(found.claimed, found.reason))


def _same(result: object, entry: Mark) -> bool:
    try:
        held = Mark.model_validate(result)
    except ValidationError:
        return False
    return (held.task_id, held.version, held.created) == (
        entry.task_id,
        entry.version,
        entry.created,
    )
