"""The in-memory store on a ManualClock: every TTL expires when the test says, without sleeping.

The contract suite (tests/contract) already runs against ``memory://``; these tests
show what only this backend offers: time moved by hand, named stores, one process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import LEASE_TOKEN
from tenure.coord import LeaseTiming
from tenure.executors.scripted import ScriptedExecutor
from tenure.protocol import Plan
from tenure.protocol.errors import (
    ConfigError,
    Conflict,
    EffectInProgress,
    LeaseLost,
    NotFound,
    ProtocolError,
)
from tenure.roles import LocalTeam
from tenure.store import ManualClock, open_store
from tenure.store.memory import MemoryStore, forget

TEAM = "team-a"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore(clock=clock)


@pytest.fixture
def named() -> Iterator[str]:
    name = "unit-memory-store"
    yield name
    forget(name)


# --- the clock ----------------------------------------------------------------------------


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(100.0)
    assert clock() == clock.now() == 100.0
    assert clock.advance(2.5) == 102.5
    clock.set(50.0)
    assert clock() == 50.0
    with pytest.raises(ProtocolError):
        clock.advance(-1)


def test_the_store_reads_time_from_its_clock(store: MemoryStore, clock: ManualClock) -> None:
    clock.set(5_000.0)
    assert store.now() == 5_000.0
    lease = store.claim_lease(TEAM, "lead", 10.0, token=LEASE_TOKEN)
    assert lease.expires_at == 5_010.0
    assert store.events(TEAM)[-1].at == 5_000.0


# --- expiry by advancing the clock --------------------------------------------------------


def test_a_lease_expires_when_the_clock_passes_its_ttl(
    store: MemoryStore, clock: ManualClock
) -> None:
    first = store.claim_lease(TEAM, "a", 10.0, token=LEASE_TOKEN)
    clock.advance(9.999)
    assert store.current_lease(TEAM) == first
    with pytest.raises(Conflict):
        store.claim_lease(TEAM, "b", 10.0, token=LEASE_TOKEN)
    clock.advance(0.001)  # expires_at is exclusive: at exactly ttl the lease is gone
    assert store.current_lease(TEAM) is None
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "a", first.epoch, 10.0, token=LEASE_TOKEN)
    second = store.claim_lease(TEAM, "b", 10.0, token=LEASE_TOKEN)
    assert second.epoch == first.epoch + 1


def test_renewing_counts_the_ttl_from_the_renewal(store: MemoryStore, clock: ManualClock) -> None:
    lease = store.claim_lease(TEAM, "a", 10.0, token=LEASE_TOKEN)
    clock.advance(8)
    store.renew_lease(TEAM, "a", lease.epoch, 10.0, token=LEASE_TOKEN)
    clock.advance(8)
    assert store.current_lease(TEAM) is not None
    clock.advance(2)
    assert store.current_lease(TEAM) is None


def test_a_member_leaves_the_live_list_when_its_ttl_passes(
    store: MemoryStore, clock: ManualClock
) -> None:
    store.join(TEAM, "m1", ttl=5.0, highest_epoch=7)
    clock.advance(4)
    store.heartbeat(TEAM, "m1", ttl=5.0)
    clock.advance(4.5)
    assert [m.member_id for m in store.members(TEAM)] == ["m1"]
    clock.advance(0.5)
    assert store.members(TEAM) == []
    with pytest.raises(NotFound):
        store.heartbeat(TEAM, "m1", ttl=5.0)
    # an expired member's reported epoch no longer pushes the next claim
    assert store.claim_lease(TEAM, "lead", 5.0, token=LEASE_TOKEN).epoch == 1


def test_an_unacked_message_comes_back_when_its_visibility_timeout_passes(
    store: MemoryStore, clock: ManualClock
) -> None:
    message_id = store.send(TEAM, "q", {"n": 1})
    (first,) = store.receive(TEAM, "q", consumer="c1", visibility_timeout=30.0)
    clock.advance(29.9)
    assert store.receive(TEAM, "q", consumer="c2", visibility_timeout=30.0) == []
    clock.advance(0.1)
    (again,) = store.receive(TEAM, "q", consumer="c2", visibility_timeout=30.0)
    assert (again.message_id, again.delivery_count) == (message_id, first.delivery_count + 1)
    assert store.ack(TEAM, "q", message_id)
    clock.advance(1_000)
    assert store.receive(TEAM, "q", consumer="c3", visibility_timeout=30.0) == []


def test_a_message_is_dead_lettered_after_its_deliveries_run_out(
    store: MemoryStore, clock: ManualClock
) -> None:
    store.send(TEAM, "q", {"n": 1})
    for _ in range(2):
        assert store.receive(TEAM, "q", consumer="c", visibility_timeout=1.0, max_deliveries=2)
        clock.advance(1.0)
    assert store.receive(TEAM, "q", consumer="c", visibility_timeout=1.0, max_deliveries=2) == []
    (dead,) = store.dead_letters(TEAM, "q")
    assert dead.delivery_count == 2


def test_an_effect_claim_can_be_taken_over_when_it_expires(
    store: MemoryStore, clock: ManualClock
) -> None:
    epoch = store.claim_lease(TEAM, "lead", 1_000.0, token=LEASE_TOKEN).epoch
    assert store.effect_begin(TEAM, "k", epoch=epoch, holder="w1", claim_seconds=60).status == "run"
    clock.advance(59)
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, "k", epoch=epoch, holder="w2", claim_seconds=60)
    clock.advance(1)
    assert store.effect_begin(TEAM, "k", epoch=epoch, holder="w2", claim_seconds=60).status == "run"
    store.effect_finish(TEAM, "k", holder="w2", result={"by": "w2"})
    ticket = store.effect_begin(TEAM, "k", epoch=epoch, holder="w1", claim_seconds=60)
    assert (ticket.status, ticket.result) == ("done", {"by": "w2"})


# --- URLs and named stores -----------------------------------------------------------------


def test_memory_url_opens_a_new_empty_store_each_time() -> None:
    one, two = open_store("memory://"), open_store("memory://")
    one.append_event(TEAM, "note", {})
    assert two.events() == []
    assert (one.url, one.distributed, one.shared_across_processes) == ("memory://", False, False)


def test_a_named_memory_store_is_the_same_store_each_time_it_is_opened(named: str) -> None:
    with open_store(f"memory://{named}") as first:
        first.append_event(TEAM, "note", {"n": 1})
    with open_store(f"memory://{named}") as again:  # close() kept the state
        assert [e.data for e in again.events(TEAM)] == [{"n": 1}]
        assert again.url == f"memory://{named}"
    assert forget(named)
    assert open_store(f"memory://{named}").events() == []


def test_a_named_store_keeps_the_clock_it_was_made_with(named: str, clock: ManualClock) -> None:
    made = MemoryStore(clock=clock, name=named)
    assert open_store(f"memory://{named}").now() == made.now() == clock()
    with pytest.raises(ConfigError):
        MemoryStore(clock=ManualClock(), name=named)


@pytest.mark.parametrize("url", ["memory://a/b", "memory://-x", "memory://a?b=1"])
def test_a_malformed_memory_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        open_store(url)


# --- one process -------------------------------------------------------------------------


def test_returned_documents_are_copies(store: MemoryStore) -> None:
    epoch = store.claim_lease(TEAM, "lead", 10.0, token=LEASE_TOKEN).epoch
    spec = {"goal": "x", "list": [1]}
    created = store.create_task(TEAM, "t1", epoch=epoch, spec=spec)
    spec["list"].append(2)
    created.spec["goal"] = "changed"
    assert store.get_task(TEAM, "t1").spec == {"goal": "x", "list": [1]}


def test_threads_racing_one_transition_have_exactly_one_winner(store: MemoryStore) -> None:
    epoch = store.claim_lease(TEAM, "lead", 1_000.0, token=LEASE_TOKEN).epoch
    task_ids = [f"t{n}" for n in range(50)]
    for task_id in task_ids:
        store.create_task(TEAM, task_id, epoch=epoch, spec={})
    won: dict[str, list[str]] = {f"w{n}": [] for n in range(8)}
    start = threading.Barrier(len(won))

    def race(name: str) -> None:
        start.wait()
        for task_id in task_ids:
            try:
                store.transition(
                    TEAM, task_id, epoch=epoch, expect=["queued"], to="running", assignee=name
                )
            except Conflict:
                continue
            won[name].append(task_id)

    threads = [threading.Thread(target=race, args=(name,)) for name in won]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(t for got in won.values() for t in got) == sorted(task_ids)
    for name, got in won.items():
        assert all(store.get_task(TEAM, t).assignee == name for t in got)


def test_a_local_team_runs_a_plan_on_a_memory_store(tmp_path: Path) -> None:
    plan = Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [
                {"id": "a", "goal": "do a"},
                {"id": "b", "goal": "do b", "depends_on": ["a"]},
            ],
        }
    )
    store = open_store("memory://")
    team = LocalTeam(
        store,
        plan,
        ScriptedExecutor({}, default={"done": True}),
        workers=2,
        timing=LeaseTiming(ttl=5.0),
        state_dir=tmp_path / "state",
        workdir=tmp_path,
    )
    assert team.run(timeout=20.0) == "settled"
    assert {t.task_id: t.state for t in store.tasks(TEAM)} == {"a": "done", "b": "done"}
