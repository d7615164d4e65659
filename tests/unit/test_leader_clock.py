"""The leader's supervision and its own deadline, on a clock the test moves: a silent
worker, an overrun deadline and a lapsed lease, with no sleeping."""

from __future__ import annotations

import pytest

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.protocol import LeaseLost, Plan
from tenure.roles.features import standard_hooks
from tenure.roles.leader import Conductor
from tenure.store import ManualClock
from tenure.store.memory import MemoryStore

TEAM = "clocked"


def setup() -> tuple[ManualClock, MemoryStore, LeaseKeeper, Conductor]:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    keeper = LeaseKeeper(store, TEAM, "lead", LeaseTiming(ttl=10), clock=clock)
    keeper.claim()
    conductor = Conductor(store, TEAM, "lead", keeper.check, stale_grace=2, hooks=standard_hooks())
    plan = {"team": TEAM, "tasks": [{"id": "t", "goal": "g", "deadline_seconds": 30}]}
    conductor.load(Plan.model_validate(plan))
    return clock, store, keeper, conductor


def test_a_worker_that_stops_heartbeating_loses_its_attempt() -> None:
    clock, store, _, conductor = setup()
    store.join(TEAM, "w1", ttl=5, capabilities=("work",))
    conductor.tick()
    assert store.get_task(TEAM, "t").assignee == "w1"
    clock.advance(6)  # w1's membership lapses; the leader's lease has 2 s left
    conductor.tick()
    task = store.get_task(TEAM, "t")
    assert (task.state, task.assignee, task.attempt) == ("queued", None, 1)
    assert "w1 stopped heartbeating" in task.data["history"][0]["failure"]


def test_an_attempt_past_its_deadline_is_retried() -> None:
    clock, store, keeper, conductor = setup()
    store.join(TEAM, "w1", ttl=1000, capabilities=("work",))
    conductor.tick()
    for _ in range(5):  # 35 s on, renewing the lease on the way as the renewer would
        clock.advance(7)
        assert keeper.renew()
    conductor.tick()
    task = store.get_task(TEAM, "t")
    assert task.state == "queued" and "deadline of 30s exceeded" in task.reason


def test_a_leader_past_its_own_deadline_stops_acting() -> None:
    clock, store, _, conductor = setup()
    store.join(TEAM, "w1", ttl=1000, capabilities=("work",))
    clock.advance(8.5)  # past ttl - margin (10 - 2): the store still says it leads
    assert store.current_lease(TEAM) is not None
    with pytest.raises(LeaseLost):
        conductor.tick()
    assert store.get_task(TEAM, "t").attempt == 0  # nothing was dispatched
