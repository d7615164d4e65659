"""A team's runs as data: what ``tenure runs`` lists, one entry per run.

A team runs its plan, and ``--fresh`` starts it over: the register is cleared and the
plan runs again, a new run at a new plan revision (mode ``fresh``). So a team's runs
are split at its fresh starts. Each fresh start recorded how the run it ended stood
(its last change, task counts, spend; ``roles.teams.fresh``) before clearing the
register, and the run going on now is read from the register. A replan changes the
goal of the run it happens in; it starts no new run.

The keys here are the documented JSON shape (docs/operations.md, JSON output): add
keys, never rename one.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tenure.console.team_data import counts
from tenure.roles.register import Task, plan_settled
from tenure.roles.register import spend as budget
from tenure.roles.register.revision import Revision, fresh_record, revisions
from tenure.roles.teams import reading
from tenure.roles.teams.fresh import FRESH_MODE
from tenure.store import Store

__all__ = ["outcome", "team_runs"]


def team_runs(store: Store, team: str) -> list[dict[str, Any]]:
    """Every run of ``team``, oldest first: those its fresh starts ended, then the
    current one."""
    starts = [r for r in revisions(store, team) if r.mode == FRESH_MODE and r.applied]
    tasks = reading.tasks(store, team)
    first = store.events(team, after=0, limit=1)
    began = min([e.at for e in first] + [t.created_at for t in tasks], default=None)
    found: list[dict[str, Any]] = []
    revision = 1
    for start in starts:
        record = fresh_record(store, team, start.revision) or {}
        found.append(_ended(team, len(found) + 1, revision, began, start, record.get("ended")))
        began, revision = start.at, start.revision
    found.append(_current(store, team, len(found) + 1, revision, began, tasks))
    return found


def _current(
    store: Store, team: str, number: int, revision: int, began: float | None, tasks: list[Task]
) -> dict[str, Any]:
    """The run going on now (or the last one), from the register and the last event."""
    last_seq = store.last_event_seq(team)
    last = store.events(team, after=max(0, last_seq - 1), limit=1) if last_seq else []
    ended = max([e.at for e in last] + [t.updated_at for t in tasks], default=None)
    lease = store.current_lease(team)
    return _run(
        team,
        number,
        revision,
        outcome(tasks, leading=lease is not None),
        lease.holder if lease else None,
        began,
        ended,
        counts(tasks),
        asdict(budget.team_totals(tasks)),
    )


def _ended(
    team: str,
    number: int,
    revision: int,
    began: float | None,
    start: Revision,
    ended: Any,
) -> dict[str, Any]:
    """A run a fresh start ended, as that start recorded it. A start that recorded
    nothing of it (made by an older version) leaves its outcome ``unknown``."""
    if not isinstance(ended, dict):
        return _run(team, number, revision, "unknown", None, began, None, {}, None)
    tally = {str(k): int(v) for k, v in dict(ended.get("counts") or {}).items()}
    return _run(
        team,
        number,
        revision,
        _settled_outcome(tally, bool(ended.get("settled"))),
        None,
        began,
        ended.get("at") or start.at,
        tally,
        ended.get("spend"),
    )


def _run(
    team: str,
    number: int,
    revision: int,
    said: str,
    leader: str | None,
    began: float | None,
    ended: float | None,
    tally: dict[str, int],
    spend: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "team": team,
        "run": number,
        "revision": revision,
        "outcome": said,
        "leader": leader,
        "started_at": began,
        "ended_at": ended,
        "duration_seconds": round(max(0.0, ended - began), 3) if began and ended else None,
        "counts": tally,
        "spend": spend,
    }


def outcome(tasks: list[Task], *, leading: bool) -> str:
    """``running`` while a leader holds the lease; else ``done``, ``waiting`` (a task
    waits for a person), ``stopped`` (open tasks, nobody leading) or ``empty``."""
    if leading:
        return "running"
    return _settled_outcome(counts(tasks), plan_settled(tasks))


def _settled_outcome(tally: dict[str, int], settled: bool) -> str:
    if not tally:
        return "empty"
    if tally.get("blocked") or tally.get("failed") or tally.get("tampered"):
        return "waiting"
    return "done" if settled else "stopped"
