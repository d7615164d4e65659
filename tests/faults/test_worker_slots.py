"""Slots per worker with real processes: ``tenure run --concurrency 4`` starts workers
that each run four attempts at once, in team mode (its leader never has more than
four in flight on one worker) and in queue mode (a worker takes several messages),
and every effect still happens once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tenure.store import Event

from .harness import Team, assert_run_safe, of_kind

pytestmark = pytest.mark.slow  # each scenario is a whole `tenure run`: one backend each

SLOTS = 4
TASKS = 6
SLEEP = "0.5"  # each attempt's work, seconds


def spans(team: Team) -> list[tuple[float, float]]:
    """Each task's attempt as the worker lived it: from its start to its effect."""
    starts = {(s["task_id"], s["attempt"]): s["time"] for s in team.started()}
    return [
        (starts[(line["task_id"], line["attempt"])], line["time"]) for line in team.ledger().lines
    ]


def peak(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment."""
    moments = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = most = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    return most


def leader_in_flight(events: list[Event]) -> int:
    """The most attempts the leader had sent one worker and not yet seen come back,
    replayed from the event log: sent at ``task.dispatched``, back once the task leaves
    its attempt (to review, or any state but running and queued-with-its-worker)."""
    holder: dict[str, str] = {}
    most = 0
    for event in events:
        task_id = event.data.get("task_id")
        if event.kind == "task.dispatched":
            holder[task_id] = event.data["assignee"]
        elif event.kind == "task.transition" and task_id in holder:
            to, was = event.data.get("to"), event.data.get("from")
            if to not in ("queued", "running") or (was == "running" and to == "queued"):
                holder.pop(task_id)
        most = max([most, *Counter(holder.values()).values()])
    return most


def attempt_claims(events: list[Event]) -> Counter[str]:
    keys = (str(e.data.get("key", "")) for e in of_kind(events, "effect.claimed"))
    return Counter(key for key in keys if ":attempt-" in key)


def finish(team: Team, *flags: str) -> dict[str, Any]:
    team.write_plan(TASKS)
    run = team.run("--concurrency", str(SLOTS), *flags, workers=1, sleep=SLEEP)
    assert run.popen.wait(timeout=60) == 0, team.report()
    tasks = team.store.tasks(team.name)
    assert_run_safe(team, tasks)
    events = team.events()
    lines = team.ledger().lines
    return {
        "events": events,
        "peak": peak(spans(team)),
        "pids": {line["pid"] for line in lines},
        "claims": attempt_claims(events),
        "joined": [
            e.data for e in of_kind(events, "member.joined") if "worker" in e.data["member"]
        ],
    }


@pytest.mark.parametrize("store_url", ["redis"], indirect=True)  # processes on many machines
def test_a_team_worker_runs_its_slots_at_once_and_is_never_overfilled(team: Team) -> None:
    seen = finish(team)
    assert len(seen["pids"]) == 1  # one worker process did all of it
    assert 3 <= seen["peak"] <= SLOTS, spans(team)
    assert leader_in_flight(seen["events"]) == SLOTS  # filled, and never beyond
    assert seen["claims"] == Counter({f"t{n:02d}:attempt-1": 1 for n in range(1, TASKS + 1)})
    assert [(j["member"], j["slots"]) for j in seen["joined"]] == [("worker-1", SLOTS)]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # processes on one machine
def test_a_queue_worker_takes_several_messages_and_runs_them_at_once(team: Team) -> None:
    seen = finish(team, "--mode", "queue")
    assert len(seen["pids"]) == 1
    assert 3 <= seen["peak"] <= SLOTS, spans(team)
    assert seen["claims"] == Counter({f"t{n:02d}:attempt-1": 1 for n in range(1, TASKS + 1)})
    assert [(j["member"], j["slots"]) for j in seen["joined"]] == [("worker-1", SLOTS)]
