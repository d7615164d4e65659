"""Reading a team's state from its store: the register, the accepted artifacts, the
decision log.

The CLI (``tenure status``, ``tenure decisions``) and the Python API read through
these, so a program sees exactly what a person sees. They only read: a reader can
run beside a live leader, in another process, on any backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tenure.roles.register import Task, read_task
from tenure.roles.register.tampered import apply_marks
from tenure.store import Event, Store
from tenure.verify.decisions import DECISION_EVENT, VERDICT_EVENT

__all__ = [
    "DECISION_KINDS",
    "DecisionRecord",
    "decision_events",
    "decisions",
    "read_decision",
    "results",
    "state_of",
    "tasks",
]

DECISION_KINDS = (VERDICT_EVENT, DECISION_EVENT)
PAGE = 1000


TAMPERED_STATE = "tampered"


def tasks(store: Store, team: str) -> list[Task]:
    """Every task of ``team`` in the register, typed, oldest first (quorum voters and
    split parts included: they are tasks of the team too). A finished task its leader
    set aside as tampered with reads so (``Task.tamper``), never as done."""
    return apply_marks(store, team, [read_task(r) for r in store.tasks(team)])


def state_of(task: Task) -> str:
    """A task's state as people are shown it: ``tampered`` for a finished task whose
    record the team did not write (it waits for a person)."""
    if task.tamper is not None and task.state in ("done", "cancelled"):
        return TAMPERED_STATE
    return task.state


def results(store: Store, team: str) -> dict[str, Any]:
    """The accepted artifact of every ``done`` task of ``team``, by task id (a task set
    aside as tampered with has none)."""
    return {t.task_id: (t.result or {}).get("artifact") for t in tasks(store, team) if t.is_done}


@dataclass(frozen=True)
class DecisionRecord:
    """One entry of the decision log: a check's verdict, or a tie-break between answers.

    ``subject`` is the check (a verdict) or the decision type (a tie-break);
    ``outcome`` is ``passed``, ``failed`` or ``escalated`` for a verdict and
    ``winner``, ``escalated``, ``undecided`` or ``abstained`` for a tie-break.
    ``inputs`` name what was weighed by reference (an idempotency key, a check);
    ``data`` is the entry as logged, for the fields no attribute carries (steps,
    evidence, details).
    """

    seq: int
    at: float
    team: str
    task_id: str
    kind: Literal["verdict", "decision"]
    subject: str
    outcome: str
    reason: str
    stage: str | None = None  # a tie-break's stage: tie-break, count (quorum), authority
    policy: str | None = None
    winner: str | None = None
    inputs: tuple[Any, ...] = ()
    warnings: tuple[str, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)


def decisions(
    store: Store, team: str | None = None, task_id: str | None = None
) -> list[DecisionRecord]:
    """The decision log of ``team`` (every team when None), oldest first; with
    ``task_id``, that task's entries and its quorum voters'."""
    return [read_decision(e) for e in decision_events(store, team, task_id)]


def decision_events(store: Store, team: str | None, task_id: str | None = None) -> list[Event]:
    """The raw verdict and decision events behind ``decisions``, oldest first."""
    found: list[Event] = []
    after = 0
    while True:
        page = store.events(team, after=after, limit=PAGE)
        if not page:
            return found
        after = page[-1].seq
        found += [
            e
            for e in page
            if e.kind in DECISION_KINDS and (task_id is None or _about(e.data, task_id))
        ]


def read_decision(event: Event) -> DecisionRecord:
    """A verdict or decision event as a record (missing fields read as empty)."""
    data = event.data
    common: dict[str, Any] = {
        "seq": event.seq,
        "at": event.at,
        "team": event.team,
        "task_id": str(data.get("task_id", "")),
        "reason": str(data.get("reason", "")),
        "inputs": tuple(data.get("inputs") or ()),
        "warnings": tuple(str(w) for w in data.get("warnings") or ()),
        "data": data,
    }
    if event.kind == VERDICT_EVENT:
        outcome = "passed" if data.get("passed") else "failed"
        if data.get("escalated"):
            outcome = "escalated"
        return DecisionRecord(
            kind="verdict", subject=str(data.get("check", "")), outcome=outcome, **common
        )
    return DecisionRecord(
        kind="decision",
        subject=str(data.get("decision", "")),
        outcome=str(data.get("outcome", "?")),
        stage=str(data.get("stage", "tie-break")),
        policy=None if data.get("policy") is None else str(data["policy"]),
        winner=None if data.get("winner") is None else str(data["winner"]),
        **common,
    )


def _about(data: dict[str, Any], task_id: str) -> bool:
    """The task's own entries and its quorum voters' (``<task>.q<round>.v<i>``)."""
    subject = str(data.get("task_id", ""))
    return (
        subject == task_id
        or data.get("replica_of") == task_id
        or subject.startswith(f"{task_id}.q")
    )
