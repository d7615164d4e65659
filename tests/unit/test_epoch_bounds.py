"""Epochs cannot be pushed far: the store refuses a claim more than ``MAX_EPOCH_JUMP``
above a team's counter, and a leader whose own memory is further ahead (its store lost
its state after a long life) climbs to it one bounded claim at a time."""

from __future__ import annotations

import pytest

from conftest import LEASE_TOKEN
from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.coord.lease import MAX_CLIMB_STEPS
from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP
from tenure.protocol.errors import ProtocolError, StoreError
from tenure.store import Event, next_epoch
from tenure.store.memory import MemoryStore

TEAM = "climb"
JUMP = MAX_EPOCH_JUMP


def claims(store: MemoryStore) -> list[Event]:
    return [e for e in store.events(TEAM) if e.kind == "lease.claimed"]


def kinds(store: MemoryStore) -> list[str]:
    return [e.kind for e in store.events(TEAM)]


def test_next_epoch_refuses_at_least_beyond_the_jump_and_an_exhausted_space() -> None:
    assert next_epoch(TEAM, 5, 5 + JUMP, [5 + 2 * JUMP]) == 5 + 2 * JUMP + 1
    with pytest.raises(ProtocolError, match="at_least"):
        next_epoch(TEAM, 5, 6 + JUMP, [])
    with pytest.raises(StoreError, match="used up"):  # only a counter at the very end
        next_epoch(TEAM, MAX_EPOCH, MAX_EPOCH, [])


def test_a_leader_far_above_a_lost_stores_counter_climbs_to_its_memory() -> None:
    store = MemoryStore()  # the store forgot everything: its counter is 0
    keeper = LeaseKeeper(store, TEAM, "L1", LeaseTiming(ttl=30))
    memory = 3 * JUMP + 5
    lease = keeper.claim(at_least=memory)
    assert (lease.holder, lease.epoch) == ("L1", memory + 1)
    assert store.current_lease(TEAM) == lease
    epochs = [e.epoch or 0 for e in claims(store)]
    assert len(epochs) == 4  # three steps, each given back at once, then the lease
    assert all(b - a <= JUMP + 1 for a, b in zip([0, *epochs], epochs, strict=False))
    assert kinds(store).count("lease.released") == 3
    assert keeper.renew()  # held with the keeper's own token


def test_a_seizure_below_the_memory_is_given_back_and_the_leader_climbs() -> None:
    store = MemoryStore()
    forged = store.claim_lease(TEAM, "L9", 30, token=LEASE_TOKEN)
    keeper = LeaseKeeper(store, TEAM, "L1", LeaseTiming(ttl=30))
    lease = keeper.seize(forged, at_least=2 * JUMP + 3)
    assert (lease.holder, lease.epoch) == ("L1", 2 * JUMP + 4)
    [seizure] = [e for e in claims(store) if "over_holder" in e.data]
    assert (seizure.data["over_holder"], seizure.data["holder"]) == ("L9", "L1")
    assert store.current_lease(TEAM) == lease and keeper.renew()


def test_within_the_jump_a_claim_is_one_claim() -> None:
    store = MemoryStore()
    keeper = LeaseKeeper(store, TEAM, "L1", LeaseTiming(ttl=30))
    assert keeper.claim(at_least=JUMP).epoch == JUMP + 1
    assert kinds(store) == ["lease.claimed"]


def test_a_memory_beyond_any_climb_is_refused_and_nothing_is_written() -> None:
    store = MemoryStore()
    keeper = LeaseKeeper(store, TEAM, "L1", LeaseTiming(ttl=30))
    with pytest.raises(ProtocolError) as caught:
        keeper.claim(at_least=MAX_CLIMB_STEPS * JUMP + 1)
    assert caught.value.field == "at_least" and "another store" in str(caught.value)
    assert store.current_epoch(TEAM) == 0 and kinds(store) == []
