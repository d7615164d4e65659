"""Membership: join with priority and capabilities, heartbeat, the live list."""

from __future__ import annotations

import time

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import MemberIdTaken, NotFound, ProtocolError
from tenure.store import Store

from ._support import OTHER_TEAM, SHORT_TTL, TEAM, kinds, last_seq, wait_out


def test_join_records_priority_capabilities_and_epoch(store: Store) -> None:
    before = store.now()
    member = store.join(
        TEAM, "m1", ttl=10.0, priority=3, capabilities=["lead", "code"], highest_epoch=4
    )
    after = store.now()
    assert (member.team, member.member_id, member.priority) == (TEAM, "m1", 3)
    assert set(member.capabilities) == {"lead", "code"}
    assert member.highest_epoch == 4
    assert before <= member.joined_at <= after
    assert before + 10.0 <= member.expires_at <= after + 10.0
    [listed] = store.members(TEAM)
    assert listed.member_id == "m1"
    assert listed.priority == 3
    assert set(listed.capabilities) == {"lead", "code"}
    assert listed.highest_epoch == 4


def test_join_defaults(store: Store) -> None:
    member = store.join(TEAM, "m1", ttl=10.0)
    assert member.priority == 0
    assert tuple(member.capabilities) == ()
    assert member.highest_epoch == 0


def test_members_are_ordered_by_priority_desc_then_id(store: Store) -> None:
    store.join(TEAM, "carol", ttl=10.0, priority=1)
    store.join(TEAM, "bob", ttl=10.0, priority=5)
    store.join(TEAM, "dave", ttl=10.0, priority=1)
    store.join(TEAM, "alice", ttl=10.0, priority=1)
    store.join(TEAM, "eve", ttl=10.0, priority=-2)
    assert [m.member_id for m in store.members(TEAM)] == ["bob", "alice", "carol", "dave", "eve"]


def test_expired_member_leaves_the_live_list(store: Store) -> None:
    store.join(TEAM, "short", ttl=SHORT_TTL)
    store.join(TEAM, "long", ttl=10.0)
    assert {m.member_id for m in store.members(TEAM)} == {"short", "long"}
    wait_out()
    assert [m.member_id for m in store.members(TEAM)] == ["long"]


def test_heartbeat_keeps_a_member_live(store: Store) -> None:
    store.join(TEAM, "m1", ttl=SHORT_TTL)
    time.sleep(SHORT_TTL * 0.6)
    beat = store.heartbeat(TEAM, "m1", ttl=SHORT_TTL)
    assert beat.member_id == "m1"
    time.sleep(SHORT_TTL * 0.6)  # past the join TTL, inside the heartbeat's
    assert [m.member_id for m in store.members(TEAM)] == ["m1"]


def test_heartbeat_keeps_priority_and_capabilities(store: Store) -> None:
    joined = store.join(TEAM, "m1", ttl=10.0, priority=7, capabilities=["lead"])
    beat = store.heartbeat(TEAM, "m1", ttl=20.0)
    assert beat.priority == 7
    assert set(beat.capabilities) == {"lead"}
    assert beat.joined_at == pytest.approx(joined.joined_at)
    assert beat.expires_at > joined.expires_at


def test_heartbeat_of_unknown_member_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.heartbeat(TEAM, "nobody", ttl=10.0)


def test_heartbeat_of_expired_member_raises_not_found(store: Store) -> None:
    store.join(TEAM, "m1", ttl=SHORT_TTL)
    wait_out()
    with pytest.raises(NotFound):
        store.heartbeat(TEAM, "m1", ttl=10.0)
    assert store.members(TEAM) == []
    # Rejoining is the way back.
    store.join(TEAM, "m1", ttl=10.0)
    assert [m.member_id for m in store.members(TEAM)] == ["m1"]


def test_heartbeat_raises_highest_epoch_and_never_lowers_it(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0, highest_epoch=3)
    assert store.heartbeat(TEAM, "m1", ttl=10.0, highest_epoch=8).highest_epoch == 8
    assert store.heartbeat(TEAM, "m1", ttl=10.0, highest_epoch=2).highest_epoch == 8
    assert store.heartbeat(TEAM, "m1", ttl=10.0).highest_epoch == 8
    [listed] = store.members(TEAM)
    assert listed.highest_epoch == 8


def test_rejoining_a_live_member_never_lowers_its_highest_epoch(store: Store) -> None:
    """A member whose local memory was lost must not weaken the store-loss defence."""
    store.join(TEAM, "m1", ttl=10.0, highest_epoch=9)
    assert store.join(TEAM, "m1", ttl=10.0, highest_epoch=4).highest_epoch == 9
    [listed] = store.members(TEAM)
    assert listed.highest_epoch == 9
    assert store.claim_lease(TEAM, "leader", 10.0, token=LEASE_TOKEN).epoch == 10


def test_leave_removes_a_member_at_once(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0)
    store.join(TEAM, "m2", ttl=10.0)
    store.leave(TEAM, "m1")
    assert [m.member_id for m in store.members(TEAM)] == ["m2"]
    with pytest.raises(NotFound):
        store.heartbeat(TEAM, "m1", ttl=10.0)


def test_leave_of_unknown_member_is_harmless(store: Store) -> None:
    store.leave(TEAM, "nobody")
    assert store.members(TEAM) == []


def test_rejoin_replaces_priority_and_capabilities(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0, priority=1, capabilities=["code"])
    store.join(TEAM, "m1", ttl=10.0, priority=9, capabilities=["lead"])
    [listed] = store.members(TEAM)
    assert listed.priority == 9
    assert set(listed.capabilities) == {"lead"}


def test_members_of_teams_are_separate(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0)
    store.join(OTHER_TEAM, "m2", ttl=10.0)
    assert [m.member_id for m in store.members(TEAM)] == ["m1"]
    assert [m.member_id for m in store.members(OTHER_TEAM)] == ["m2"]
    assert store.members("team-nobody-joined") == []


@pytest.mark.parametrize("ttl", [0, -1.0])
def test_join_with_non_positive_ttl_raises_protocol_error(store: Store, ttl: float) -> None:
    with pytest.raises(ProtocolError) as caught:
        store.join(TEAM, "m1", ttl=ttl)
    assert caught.value.field == "ttl"
    assert store.members(TEAM) == []


def test_heartbeat_with_non_positive_ttl_raises_protocol_error(store: Store) -> None:
    store.join(TEAM, "m1", ttl=10.0)
    with pytest.raises(ProtocolError) as caught:
        store.heartbeat(TEAM, "m1", ttl=0)
    assert caught.value.field == "ttl"


# --- a live member id belongs to one incarnation -------------------------------------------


def test_join_under_a_live_id_of_another_incarnation_is_refused(store: Store) -> None:
    store.join(TEAM, "w1", ttl=10.0, priority=1, incarnation="first")
    before = last_seq(store, TEAM)
    with pytest.raises(MemberIdTaken) as caught:
        store.join(TEAM, "w1", ttl=10.0, priority=9, incarnation="second")
    line = str(caught.value)
    assert line.startswith(f"member id w1 is live in team {TEAM} (last heartbeat ")
    assert "choose another --member or wait" in line
    assert 9.0 <= caught.value.wait <= 10.0 and caught.value.beat_ago < 5.0
    # nothing changed: the holder keeps its priority, no join was recorded
    [listed] = store.members(TEAM)
    assert (listed.priority, listed.incarnation) == (1, "first")
    assert kinds(store, after=before) == []


def test_a_member_renews_and_rejoins_under_its_own_incarnation(store: Store) -> None:
    store.join(TEAM, "w1", ttl=10.0, incarnation="mine")
    assert store.heartbeat(TEAM, "w1", ttl=10.0, incarnation="mine").incarnation == "mine"
    rejoined = store.join(TEAM, "w1", ttl=10.0, priority=4, incarnation="mine")
    assert rejoined.priority == 4
    [listed] = store.members(TEAM)
    assert listed.incarnation == "mine" and listed.beat_at > 0


def test_heartbeat_of_another_incarnation_is_refused(store: Store) -> None:
    """An impostor holding our id after our heartbeat lapsed: our renewal is told apart."""
    store.join(TEAM, "w1", ttl=10.0, incarnation="impostor")
    with pytest.raises(MemberIdTaken):
        store.heartbeat(TEAM, "w1", ttl=10.0, incarnation="original")
    [listed] = store.members(TEAM)
    assert listed.incarnation == "impostor"


def test_an_id_is_free_again_once_its_heartbeat_lapsed(store: Store) -> None:
    store.join(TEAM, "w1", ttl=SHORT_TTL, incarnation="old")
    wait_out()
    store.join(TEAM, "w1", ttl=10.0, incarnation="new")
    [listed] = store.members(TEAM)
    assert listed.incarnation == "new"
    with pytest.raises(MemberIdTaken):  # the old one's renewal is refused, and its rejoin
        store.heartbeat(TEAM, "w1", ttl=10.0, incarnation="old")
    with pytest.raises(MemberIdTaken):
        store.join(TEAM, "w1", ttl=10.0, incarnation="old")


def test_an_id_is_free_again_once_its_member_left(store: Store) -> None:
    store.join(TEAM, "w1", ttl=10.0, incarnation="old")
    store.leave(TEAM, "w1")
    assert store.join(TEAM, "w1", ttl=10.0, incarnation="new").incarnation == "new"


def test_of_three_concurrent_joins_under_one_id_exactly_one_wins(store_url: str) -> None:
    """Each join on its own connection, all at once: the store, not timing, decides."""
    from concurrent.futures import ThreadPoolExecutor

    from tenure.store import open_store

    def attempt(n: int) -> bool:
        with open_store(store_url) as mine:
            try:
                mine.join(TEAM, "w1", ttl=10.0, incarnation=f"process-{n}")
            except MemberIdTaken:
                return False
            return True

    with ThreadPoolExecutor(3) as pool:
        won = list(pool.map(attempt, range(3)))
    assert won.count(True) == 1
