"""Leadership lease: one holder per epoch, an epoch counter that only grows."""

from __future__ import annotations

import time

import pytest

from tenure.protocol.errors import Conflict, LeaseLost, ProtocolError, StoreError
from tenure.store import Store

from ._support import OTHER_TEAM, SHORT_TTL, TEAM, wait_out


def test_claim_on_vacant_lease_gets_epoch_one(store: Store) -> None:
    assert store.current_epoch(TEAM) == 0
    before = store.now()
    lease = store.claim_lease(TEAM, "alice", 10.0)
    after = store.now()
    assert (lease.team, lease.holder, lease.epoch, lease.ttl) == (TEAM, "alice", 1, 10.0)
    assert before + 10.0 <= lease.expires_at <= after + 10.0
    assert store.current_epoch(TEAM) == 1


def test_second_claimer_gets_conflict_while_lease_is_live(store: Store) -> None:
    store.claim_lease(TEAM, "alice", 10.0)
    with pytest.raises(Conflict):
        store.claim_lease(TEAM, "bob", 10.0)
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("alice", 1)
    assert store.current_epoch(TEAM) == 1


def test_after_expiry_another_holder_claims_at_next_epoch(store: Store) -> None:
    first = store.claim_lease(TEAM, "alice", SHORT_TTL)
    wait_out()
    second = store.claim_lease(TEAM, "bob", 10.0)
    assert (second.holder, second.epoch) == ("bob", first.epoch + 1)
    assert store.current_epoch(TEAM) == first.epoch + 1


def test_renew_extends_the_lease_past_its_first_expiry(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", SHORT_TTL)
    time.sleep(SHORT_TTL * 0.6)
    renewed = store.renew_lease(TEAM, "alice", lease.epoch, SHORT_TTL)
    assert renewed.epoch == lease.epoch
    assert renewed.holder == "alice"
    assert renewed.expires_at > lease.expires_at
    time.sleep(SHORT_TTL * 0.6)  # past the first expiry, inside the renewed one
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("alice", lease.epoch)
    with pytest.raises(Conflict):
        store.claim_lease(TEAM, "bob", 10.0)


def test_renew_by_wrong_holder_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "bob", lease.epoch, 10.0)
    current = store.current_lease(TEAM)
    assert current is not None
    assert current.holder == "alice"


def test_renew_at_wrong_epoch_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0)
    for epoch in (lease.epoch - 1, lease.epoch + 1):
        with pytest.raises(LeaseLost):
            store.renew_lease(TEAM, "alice", epoch, 10.0)


def test_renew_after_expiry_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", SHORT_TTL)
    wait_out()
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", lease.epoch, 10.0)
    assert store.current_lease(TEAM) is None


def test_renew_after_someone_else_took_over_raises_lease_lost(store: Store) -> None:
    old = store.claim_lease(TEAM, "alice", SHORT_TTL)
    wait_out()
    new = store.claim_lease(TEAM, "bob", 10.0)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", old.epoch, 10.0)
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("bob", new.epoch)


def test_renew_of_a_never_claimed_lease_raises_lease_lost(store: Store) -> None:
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", 1, 10.0)


def test_release_keeps_the_epoch_counter(store: Store) -> None:
    first = store.claim_lease(TEAM, "alice", 10.0)
    assert store.release_lease(TEAM, "alice", first.epoch) is True
    assert store.current_lease(TEAM) is None
    assert store.current_epoch(TEAM) == first.epoch
    second = store.claim_lease(TEAM, "alice", 10.0)
    assert second.epoch == first.epoch + 1
    assert store.release_lease(TEAM, "alice", second.epoch) is True
    third = store.claim_lease(TEAM, "bob", 10.0)
    assert third.epoch == first.epoch + 2


def test_release_by_non_holder_returns_false_and_keeps_the_lease(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0)
    assert store.release_lease(TEAM, "bob", lease.epoch) is False
    assert store.release_lease(TEAM, "alice", lease.epoch + 1) is False
    assert store.release_lease(TEAM, "alice", lease.epoch - 1) is False
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("alice", lease.epoch)


def test_release_of_vacant_lease_returns_false(store: Store) -> None:
    assert store.release_lease(TEAM, "alice", 1) is False
    assert store.current_epoch(TEAM) == 0


def test_renew_after_release_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0)
    store.release_lease(TEAM, "alice", lease.epoch)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", lease.epoch, 10.0)


def test_current_lease_is_none_when_vacant(store: Store) -> None:
    assert store.current_lease(TEAM) is None


def test_current_lease_is_none_when_expired(store: Store) -> None:
    store.claim_lease(TEAM, "alice", SHORT_TTL)
    assert store.current_lease(TEAM) is not None
    wait_out()
    assert store.current_lease(TEAM) is None
    # Expiry does not reset the counter.
    assert store.current_epoch(TEAM) == 1


def test_current_lease_reports_the_live_holder(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0)
    assert store.current_lease(TEAM) == lease


def test_at_least_pushes_the_next_epoch_above_it(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, at_least=41)
    assert lease.epoch == 42
    assert store.current_epoch(TEAM) == 42
    store.release_lease(TEAM, "alice", lease.epoch)
    # A lower at_least never pulls the counter down.
    again = store.claim_lease(TEAM, "alice", 10.0, at_least=5)
    assert again.epoch == 43


def test_live_members_reported_epochs_push_the_next_epoch_above_them(store: Store) -> None:
    # Store loss defence: a fresh store whose members have seen epoch 17.
    store.join(TEAM, "f1", ttl=10.0, highest_epoch=17)
    store.join(TEAM, "f2", ttl=10.0, highest_epoch=9)
    lease = store.claim_lease(TEAM, "leader", 10.0)
    assert lease.epoch == 18
    store.release_lease(TEAM, "leader", lease.epoch)
    store.heartbeat(TEAM, "f2", ttl=10.0, highest_epoch=30)
    assert store.claim_lease(TEAM, "leader", 10.0).epoch == 31


def test_the_largest_of_counter_at_least_and_members_wins(store: Store) -> None:
    store.join(TEAM, "f1", ttl=10.0, highest_epoch=7)
    assert store.claim_lease(TEAM, "leader", 10.0, at_least=3).epoch == 8
    store.release_lease(TEAM, "leader", 8)
    assert store.claim_lease(TEAM, "leader", 10.0, at_least=20).epoch == 21


def test_expired_members_reported_epochs_do_not_count(store: Store) -> None:
    store.join(TEAM, "gone", ttl=SHORT_TTL, highest_epoch=50)
    wait_out()
    assert store.claim_lease(TEAM, "leader", 10.0).epoch == 1


@pytest.mark.parametrize("ttl", [0, 0.0, -1.0])
def test_claim_with_non_positive_ttl_raises_protocol_error(store: Store, ttl: float) -> None:
    with pytest.raises(ProtocolError) as caught:
        store.claim_lease(TEAM, "alice", ttl)
    assert caught.value.field == "ttl"
    assert "ttl" in str(caught.value)
    assert store.current_lease(TEAM) is None
    assert store.current_epoch(TEAM) == 0


@pytest.mark.parametrize("ttl", [0, -0.5])
def test_renew_with_non_positive_ttl_raises_protocol_error(store: Store, ttl: float) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0)
    with pytest.raises(ProtocolError) as caught:
        store.renew_lease(TEAM, "alice", lease.epoch, ttl)
    assert caught.value.field == "ttl"
    assert store.current_lease(TEAM) == lease


def test_teams_have_separate_leases_and_epochs(store: Store) -> None:
    store.claim_lease(TEAM, "alice", 10.0, at_least=10)
    other = store.claim_lease(OTHER_TEAM, "bob", 10.0)
    assert other.epoch == 1
    assert store.current_epoch(TEAM) == 11
    assert store.current_epoch(OTHER_TEAM) == 1
    assert sorted(store.teams()) == sorted([TEAM, OTHER_TEAM])


# --- epoch bounds: no member can push a team toward the end of its epoch space ----------


def test_an_epoch_past_the_exact_integer_limit_is_refused_before_it_is_written(
    store: Store,
) -> None:
    from tenure.protocol.envelope import MAX_EPOCH

    with pytest.raises(ProtocolError, match="highest_epoch"):
        store.join(TEAM, "m", ttl=30, highest_epoch=2**63)
    assert store.members(TEAM) == []
    store.create_task(TEAM, "t", epoch=0, spec={"goal": "g"})
    with pytest.raises(ProtocolError, match="epoch"):
        store.transition(TEAM, "t", epoch=MAX_EPOCH + 1, expect=["queued"], to="running")
    assert store.get_task(TEAM, "t").state == "queued"
    with pytest.raises(ProtocolError, match="at_least"):
        store.claim_lease(TEAM, "lead", 30, at_least=-1)


def test_a_members_reported_epoch_lifts_a_claim_only_so_far(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH_JUMP

    store.join(TEAM, "honest", ttl=30, highest_epoch=57)  # after a store loss: believed
    store.join(TEAM, "pusher", ttl=30, highest_epoch=10**12)  # far beyond: ignored
    assert store.claim_lease(TEAM, "lead", 30).epoch == 58
    store.release_lease(TEAM, "lead", 58)
    store.join(TEAM, "edge", ttl=30, highest_epoch=58 + MAX_EPOCH_JUMP)
    assert store.claim_lease(TEAM, "lead", 30).epoch == 59 + MAX_EPOCH_JUMP


def test_a_team_whose_epochs_are_used_up_refuses_a_claim(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH

    with pytest.raises(StoreError, match="epochs are used up"):
        store.claim_lease(TEAM, "lead", 30, at_least=MAX_EPOCH)
    assert store.current_lease(TEAM) is None
