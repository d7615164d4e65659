"""A team as data: what ``status --json``, ``run --json`` and ``runs`` print.

The keys here are the documented JSON shape (docs/operations.md, JSON output): add
keys, never rename one. A task carries its result, the accepted artifact, so a script
needs nothing else: cut to ``RESULT_BYTES`` with a note saying so (``jsonout``
redacts it as it does everything printed).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from tenure.protocol.errors import ProtocolError
from tenure.protocol.limits import json_size, over
from tenure.roles.register import Task
from tenure.roles.register import spend as budget
from tenure.roles.teams import reading
from tenure.store import Store

RESULT_BYTES = 64 * 1024
"""The largest artifact a task object holds; a larger one is left out, with a note."""


def task_row(task: Task, now: float, reason: str) -> dict[str, Any]:
    result, note = accepted(task)
    return {
        "task_id": task.task_id,
        "state": task.state,
        "attempt": task.attempt,
        "assignee": task.assignee,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "age_seconds": round(max(0.0, now - task.updated_at), 3),
        "reason": reason,
        "spend": asdict(budget.task_totals(task)),
        "result": result,
        "result_note": note,
        "tampered": reading.state_of(task) == "tampered",  # finished, set aside: see inbox
    }


def accepted(task: Task) -> tuple[Any, str | None]:
    """The task's accepted artifact (None unless it is done, and not set aside as
    tampered with), and why it is left out when it is over ``RESULT_BYTES``."""
    if task.state != "done" or reading.state_of(task) == "tampered":
        return None, None
    artifact = (task.result or {}).get("artifact")
    try:
        size = json_size(artifact)
    except ProtocolError as exc:  # stored by an older version: too deep to print
        return None, f"left out: {exc.expected}"
    if size > RESULT_BYTES:
        return None, f"left out: {over(size, RESULT_BYTES)} (tenure.results in Python has it)"
    return artifact, None


def counts(tasks: list[Task]) -> dict[str, int]:
    """How many tasks are in each state, by state name (``tampered`` for a finished
    task set aside as tampered with)."""
    return dict(sorted(Counter(reading.state_of(t) for t in tasks).items()))


def team_data(store: Store, team: str, reasons: dict[str, str] | None = None) -> dict[str, Any]:
    """One team: its lease, live members, task counts, spend and every task."""
    now = store.now()
    lease = store.current_lease(team)
    tasks = reading.tasks(store, team)
    why = reasons or {}
    return {
        "team": team,
        "leader": lease.holder if lease else None,
        "epoch": lease.epoch if lease else store.current_epoch(team),
        "members": [m.member_id for m in store.members(team)],
        "counts": counts(tasks),
        "spend": asdict(budget.team_totals(tasks)),
        "tasks": [task_row(t, now, why.get(t.task_id, t.reason)) for t in tasks],
    }
