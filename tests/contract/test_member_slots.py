"""Membership slots: how many attempts a member runs at once, and how many are free."""

from __future__ import annotations

import pytest

from tenure.protocol.errors import ProtocolError
from tenure.protocol.limits import MAX_PRIORITY, MAX_SLOTS
from tenure.store import Store

from ._support import TEAM, last_seq


def test_a_member_that_says_nothing_has_one_slot_free(store: Store) -> None:
    joined = store.join(TEAM, "m1", ttl=10.0)
    assert (joined.slots, joined.free_slots) == (1, 1)
    beat = store.heartbeat(TEAM, "m1", ttl=10.0)
    assert (beat.slots, beat.free_slots) == (1, 1)


def test_join_records_slots_all_free_unless_said(store: Store) -> None:
    joined = store.join(TEAM, "m1", ttl=10.0, slots=4)
    assert (joined.slots, joined.free_slots) == (4, 4)
    store.join(TEAM, "m2", ttl=10.0, slots=3, free_slots=1)
    listed = {m.member_id: (m.slots, m.free_slots) for m in store.members(TEAM)}
    assert listed == {"m1": (4, 4), "m2": (3, 1)}


def test_heartbeat_says_free_slots_and_one_that_does_not_keeps_them(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0, slots=4, capabilities=["work"], priority=2)
    beat = store.heartbeat(TEAM, "m1", ttl=10.0, free_slots=1)
    assert (beat.slots, beat.free_slots, beat.priority) == (4, 1, 2)
    assert set(beat.capabilities) == {"work"}
    assert store.heartbeat(TEAM, "m1", ttl=10.0).free_slots == 1
    [listed] = store.members(TEAM)
    assert (listed.slots, listed.free_slots) == (4, 1)
    assert store.heartbeat(TEAM, "m1", ttl=10.0, free_slots=0).free_slots == 0


def test_free_slots_are_never_more_than_slots(store: Store) -> None:
    assert store.join(TEAM, "m1", ttl=10.0, slots=2, free_slots=5).free_slots == 2
    assert store.heartbeat(TEAM, "m1", ttl=10.0, free_slots=9).free_slots == 2
    [listed] = store.members(TEAM)
    assert listed.free_slots == 2


def test_a_rejoin_replaces_slots(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0, slots=8)
    store.heartbeat(TEAM, "m1", ttl=10.0, free_slots=3)
    store.join(TEAM, "m1", ttl=10.0, slots=2)
    [listed] = store.members(TEAM)
    assert (listed.slots, listed.free_slots) == (2, 2)


def test_the_join_event_says_the_slots(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0, slots=6)
    [joined] = store.events(TEAM)
    assert (joined.kind, joined.data.get("slots")) == ("member.joined", 6)


@pytest.mark.parametrize("slots", [0, -1, MAX_SLOTS + 1, True, 2.0])
def test_join_with_bad_slots_is_refused_and_changes_nothing(store: Store, slots: object) -> None:
    before = last_seq(store, TEAM)
    with pytest.raises(ProtocolError) as caught:
        store.join(TEAM, "m1", ttl=10.0, slots=slots)  # type: ignore[arg-type]
    assert caught.value.field == "slots"
    assert store.members(TEAM) == []
    assert last_seq(store, TEAM) == before


@pytest.mark.parametrize("priority", [2**63, -(2**63) - 1, MAX_PRIORITY + 1, True, 1.5, "1"])
def test_join_with_a_priority_no_backend_keeps_is_refused_and_changes_nothing(
    store: Store, priority: object
) -> None:
    before = last_seq(store, TEAM)
    with pytest.raises(ProtocolError) as caught:
        store.join(TEAM, "m1", ttl=10.0, priority=priority)  # type: ignore[arg-type]
    assert caught.value.field == "priority"
    assert store.members(TEAM) == []
    assert last_seq(store, TEAM) == before
    store.join(TEAM, "m1", ttl=10.0, priority=-MAX_PRIORITY)  # the bounds themselves are kept
    assert [m.priority for m in store.members(TEAM)] == [-MAX_PRIORITY]


@pytest.mark.parametrize("free", [-1, True, 1.5])
def test_bad_free_slots_are_refused(store: Store, free: object) -> None:
    with pytest.raises(ProtocolError) as caught:
        store.join(TEAM, "m1", ttl=10.0, slots=2, free_slots=free)  # type: ignore[arg-type]
    assert caught.value.field == "free_slots"
    store.join(TEAM, "m1", ttl=10.0, slots=2)
    with pytest.raises(ProtocolError) as caught:
        store.heartbeat(TEAM, "m1", ttl=10.0, free_slots=free)  # type: ignore[arg-type]
    assert caught.value.field == "free_slots"
    [listed] = store.members(TEAM)
    assert listed.free_slots == 2
