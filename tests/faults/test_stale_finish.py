"""A leader paused *inside* a tick wakes to a plan its successor finished: it must step
down, not announce the finish under its stale epoch. The SIGSTOP scenario hits this only
when the signal lands mid-tick, so here the pause is placed there on purpose (in-process)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from conftest import LEASE_TOKEN
from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.protocol import Plan, PlanTask
from tenure.roles import Leader, LeaderConfig
from tenure.roles.leader.conductor import Conductor
from tenure.store import Store, open_store

from .harness import of_kind

pytestmark = pytest.mark.slow
TTL = 0.5


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def test_leader_paused_mid_tick_does_not_announce_the_finish(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = f"stale-finish-{uuid.uuid4().hex[:8]}"
    plan = Plan(team=team, tasks=[PlanTask(id="t1", goal="anything")])
    real_tick, real_renew = Conductor.tick, LeaseKeeper.renew
    paused = threading.Event()

    def renew(self: LeaseKeeper) -> bool:  # a paused process renews nothing either
        return False if paused.is_set() else real_renew(self)

    def tick_then_pause(self: Conductor, wait: float = 0.0) -> bool:
        busy = real_tick(self, wait=wait)  # passed its own deadline check at the start
        if self.me == "L1" and not busy:  # paused here, past the TTL
            paused.set()
            time.sleep(TTL * 1.5)
            epoch = store.claim_lease(team, "L2", 30.0, token=LEASE_TOKEN).epoch  # the successor
            for before, after in (("queued", "running"), ("running", "review"), ("review", "done")):
                store.transition(team, "t1", epoch=epoch, expect=[before], to=after)
            store.append_event(team, "leader.plan_settled", {"leader": "L2"}, epoch=epoch)
            monkeypatch.setattr(Conductor, "tick", real_tick)
            paused.clear()
        return busy

    monkeypatch.setattr(Conductor, "tick", tick_then_pause)
    monkeypatch.setattr(LeaseKeeper, "renew", renew)
    config = LeaderConfig(team=team, member_id="L1", priority=30, timing=LeaseTiming(ttl=TTL))
    stop = threading.Event()
    runner = threading.Thread(target=Leader(store, config, plan).run, args=(stop,), daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while not of_kind(store.events(team), "leader.stepped_down", leader="L1"):
            assert time.monotonic() < deadline, "L1 never stepped down"
            time.sleep(0.02)
    finally:
        stop.set()
        runner.join(timeout=10)
    finished = of_kind(store.events(team), "leader.plan_settled", leader="L1")
    assert [e.epoch for e in finished if e.epoch == 1] == [], "L1 announced at its stale epoch"
