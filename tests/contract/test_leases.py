"""Leadership lease: one holder per epoch, an epoch counter that only grows."""

from __future__ import annotations

import time

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import Conflict, LeaseLost, ProtocolError
from tenure.store import Store

from ._support import OTHER_TEAM, SHORT_TTL, TEAM, wait_out


def test_claim_on_vacant_lease_gets_epoch_one(store: Store) -> None:
    assert store.current_epoch(TEAM) == 0
    before = store.now()
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    after = store.now()
    assert (lease.team, lease.holder, lease.epoch, lease.ttl) == (TEAM, "alice", 1, 10.0)
    assert before + 10.0 <= lease.expires_at <= after + 10.0
    assert store.current_epoch(TEAM) == 1


def test_second_claimer_gets_conflict_while_lease_is_live(store: Store) -> None:
    store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    with pytest.raises(Conflict):
        store.claim_lease(TEAM, "bob", 10.0, token=LEASE_TOKEN)
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("alice", 1)
    assert store.current_epoch(TEAM) == 1


def test_after_expiry_another_holder_claims_at_next_epoch(store: Store) -> None:
    first = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    wait_out()
    second = store.claim_lease(TEAM, "bob", 10.0, token=LEASE_TOKEN)
    assert (second.holder, second.epoch) == ("bob", first.epoch + 1)
    assert store.current_epoch(TEAM) == first.epoch + 1


def test_renew_extends_the_lease_past_its_first_expiry(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    time.sleep(SHORT_TTL * 0.6)
    renewed = store.renew_lease(TEAM, "alice", lease.epoch, SHORT_TTL, token=LEASE_TOKEN)
    assert renewed.epoch == lease.epoch
    assert renewed.holder == "alice"
    assert renewed.expires_at > lease.expires_at
    time.sleep(SHORT_TTL * 0.6)  # past the first expiry, inside the renewed one
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("alice", lease.epoch)
    with pytest.raises(Conflict):
        store.claim_lease(TEAM, "bob", 10.0, token=LEASE_TOKEN)


def test_renew_by_wrong_holder_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "bob", lease.epoch, 10.0, token=LEASE_TOKEN)
    current = store.current_lease(TEAM)
    assert current is not None
    assert current.holder == "alice"


def test_renew_at_wrong_epoch_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    for epoch in (lease.epoch - 1, lease.epoch + 1):
        with pytest.raises(LeaseLost):
            store.renew_lease(TEAM, "alice", epoch, 10.0, token=LEASE_TOKEN)


def test_renew_after_expiry_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    wait_out()
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", lease.epoch, 10.0, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) is None


def test_renew_after_someone_else_took_over_raises_lease_lost(store: Store) -> None:
    old = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    wait_out()
    new = store.claim_lease(TEAM, "bob", 10.0, token=LEASE_TOKEN)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", old.epoch, 10.0, token=LEASE_TOKEN)
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("bob", new.epoch)


def test_renew_of_a_never_claimed_lease_raises_lease_lost(store: Store) -> None:
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", 1, 10.0, token=LEASE_TOKEN)


def test_release_keeps_the_epoch_counter(store: Store) -> None:
    first = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    assert store.release_lease(TEAM, "alice", first.epoch, token=LEASE_TOKEN) is True
    assert store.current_lease(TEAM) is None
    assert store.current_epoch(TEAM) == first.epoch
    second = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    assert second.epoch == first.epoch + 1
    assert store.release_lease(TEAM, "alice", second.epoch, token=LEASE_TOKEN) is True
    third = store.claim_lease(TEAM, "bob", 10.0, token=LEASE_TOKEN)
    assert third.epoch == first.epoch + 2


def test_release_by_non_holder_returns_false_and_keeps_the_lease(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    assert store.release_lease(TEAM, "bob", lease.epoch, token=LEASE_TOKEN) is False
    assert store.release_lease(TEAM, "alice", lease.epoch + 1, token=LEASE_TOKEN) is False
    assert store.release_lease(TEAM, "alice", lease.epoch - 1, token=LEASE_TOKEN) is False
    current = store.current_lease(TEAM)
    assert current is not None
    assert (current.holder, current.epoch) == ("alice", lease.epoch)


def test_release_of_vacant_lease_returns_false(store: Store) -> None:
    assert store.release_lease(TEAM, "alice", 1, token=LEASE_TOKEN) is False
    assert store.current_epoch(TEAM) == 0


def test_renew_after_release_raises_lease_lost(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", lease.epoch, 10.0, token=LEASE_TOKEN)


def test_current_lease_is_none_when_vacant(store: Store) -> None:
    assert store.current_lease(TEAM) is None


def test_current_lease_is_none_when_expired(store: Store) -> None:
    store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) is not None
    wait_out()
    assert store.current_lease(TEAM) is None
    # Expiry does not reset the counter.
    assert store.current_epoch(TEAM) == 1


def test_current_lease_reports_the_live_holder(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) == lease


def test_at_least_pushes_the_next_epoch_above_it(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, at_least=41, token=LEASE_TOKEN)
    assert lease.epoch == 42
    assert store.current_epoch(TEAM) == 42
    store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN)
    # A lower at_least never pulls the counter down.
    again = store.claim_lease(TEAM, "alice", 10.0, at_least=5, token=LEASE_TOKEN)
    assert again.epoch == 43


def test_live_members_reported_epochs_push_the_next_epoch_above_them(store: Store) -> None:
    # Store loss defence: a fresh store whose members have seen epoch 17.
    store.join(TEAM, "f1", ttl=10.0, highest_epoch=17)
    store.join(TEAM, "f2", ttl=10.0, highest_epoch=9)
    lease = store.claim_lease(TEAM, "leader", 10.0, token=LEASE_TOKEN)
    assert lease.epoch == 18
    store.release_lease(TEAM, "leader", lease.epoch, token=LEASE_TOKEN)
    store.heartbeat(TEAM, "f2", ttl=10.0, highest_epoch=30)
    assert store.claim_lease(TEAM, "leader", 10.0, token=LEASE_TOKEN).epoch == 31


def test_the_largest_of_counter_at_least_and_members_wins(store: Store) -> None:
    store.join(TEAM, "f1", ttl=10.0, highest_epoch=7)
    assert store.claim_lease(TEAM, "leader", 10.0, at_least=3, token=LEASE_TOKEN).epoch == 8
    store.release_lease(TEAM, "leader", 8, token=LEASE_TOKEN)
    assert store.claim_lease(TEAM, "leader", 10.0, at_least=20, token=LEASE_TOKEN).epoch == 21


def test_expired_members_reported_epochs_do_not_count(store: Store) -> None:
    store.join(TEAM, "gone", ttl=SHORT_TTL, highest_epoch=50)
    wait_out()
    assert store.claim_lease(TEAM, "leader", 10.0, token=LEASE_TOKEN).epoch == 1


@pytest.mark.parametrize("ttl", [0, 0.0, -1.0])
def test_claim_with_non_positive_ttl_raises_protocol_error(store: Store, ttl: float) -> None:
    with pytest.raises(ProtocolError) as caught:
        store.claim_lease(TEAM, "alice", ttl, token=LEASE_TOKEN)
    assert caught.value.field == "ttl"
    assert "ttl" in str(caught.value)
    assert store.current_lease(TEAM) is None
    assert store.current_epoch(TEAM) == 0


@pytest.mark.parametrize("ttl", [0, -0.5])
def test_renew_with_non_positive_ttl_raises_protocol_error(store: Store, ttl: float) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    with pytest.raises(ProtocolError) as caught:
        store.renew_lease(TEAM, "alice", lease.epoch, ttl, token=LEASE_TOKEN)
    assert caught.value.field == "ttl"
    assert store.current_lease(TEAM) == lease


def test_teams_have_separate_leases_and_epochs(store: Store) -> None:
    store.claim_lease(TEAM, "alice", 10.0, at_least=10, token=LEASE_TOKEN)
    other = store.claim_lease(OTHER_TEAM, "bob", 10.0, token=LEASE_TOKEN)
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
        store.claim_lease(TEAM, "lead", 30, at_least=-1, token=LEASE_TOKEN)


def test_a_members_reported_epoch_lifts_a_claim_only_so_far(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH_JUMP

    store.join(TEAM, "honest", ttl=30, highest_epoch=57)  # after a store loss: believed
    store.join(TEAM, "pusher", ttl=30, highest_epoch=10**12)  # far beyond: ignored
    assert store.claim_lease(TEAM, "lead", 30, token=LEASE_TOKEN).epoch == 58
    store.release_lease(TEAM, "lead", 58, token=LEASE_TOKEN)
    store.join(TEAM, "edge", ttl=30, highest_epoch=58 + MAX_EPOCH_JUMP)
    assert store.claim_lease(TEAM, "lead", 30, token=LEASE_TOKEN).epoch == 59 + MAX_EPOCH_JUMP


def test_at_least_further_than_the_jump_above_the_counter_is_refused(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP

    # the bound itself is allowed: a leader's memory after its store lost everything
    edge = store.claim_lease(TEAM, "lead", 30, at_least=MAX_EPOCH_JUMP, token=LEASE_TOKEN)
    assert edge.epoch == MAX_EPOCH_JUMP + 1
    store.release_lease(TEAM, "lead", edge.epoch, token=LEASE_TOKEN)
    counter, before = store.current_epoch(TEAM), store.events(TEAM)
    for far in (counter + MAX_EPOCH_JUMP + 1, 10**12, 2**53 - 2, MAX_EPOCH):
        with pytest.raises(ProtocolError) as caught:
            store.claim_lease(TEAM, "evil", 30, at_least=far, token=LEASE_TOKEN)
        assert caught.value.field == "at_least"
        assert str(MAX_EPOCH_JUMP) in str(caught.value) and str(far) in str(caught.value)
    assert store.current_epoch(TEAM) == counter  # nothing written
    assert store.current_lease(TEAM) is None
    assert store.events(TEAM) == before
    nearest = store.claim_lease(
        TEAM, "lead", 30, at_least=counter + MAX_EPOCH_JUMP, token=LEASE_TOKEN
    )
    assert nearest.epoch == counter + MAX_EPOCH_JUMP + 1


def test_a_seizure_with_an_epoch_jump_too_far_changes_nothing(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH_JUMP

    held = store.claim_lease(TEAM, "lead", 30, token=LEASE_TOKEN)
    before = store.events(TEAM)
    for far in (held.epoch + MAX_EPOCH_JUMP + 1, 10**12, 2**53 - 2):
        with pytest.raises(ProtocolError, match="at_least"):
            store.seize_lease(TEAM, "evil", 30, over=held, at_least=far, token=OTHER_TOKEN)
    assert store.current_lease(TEAM) == held
    assert store.current_epoch(TEAM) == held.epoch
    assert store.events(TEAM) == before
    assert store.renew_lease(TEAM, "lead", held.epoch, 30, token=LEASE_TOKEN).epoch == held.epoch


def test_a_members_report_and_at_least_together_stay_within_the_jump(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH_JUMP

    # at_least at the bound, and a member reporting the bound above that: both count
    store.join(TEAM, "edge", ttl=30, highest_epoch=2 * MAX_EPOCH_JUMP)
    lease = store.claim_lease(TEAM, "lead", 30, at_least=MAX_EPOCH_JUMP, token=LEASE_TOKEN)
    assert lease.epoch == 2 * MAX_EPOCH_JUMP + 1


# --- the holder token: only the claimer can renew, prove or release its lease ------------

OTHER_TOKEN = "another-holders-token-0123"


def _wrong_tokens() -> list[object]:
    from tenure.store.rules import token_hash

    return [OTHER_TOKEN, "", None, 42, LEASE_TOKEN + "x", LEASE_TOKEN.upper(),
            token_hash(LEASE_TOKEN)]  # fmt: skip


@pytest.mark.parametrize("token", _wrong_tokens())
def test_a_wrong_or_missing_token_cannot_renew_prove_or_release(
    store: Store, token: object
) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    before = store.events(TEAM)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", lease.epoch, 60.0, token=token)  # type: ignore[arg-type]
    with pytest.raises(LeaseLost):
        store.prove_lease(TEAM, "alice", lease.epoch, PROOF, token=token)  # type: ignore[arg-type]
    assert store.release_lease(TEAM, "alice", lease.epoch, token=token) is False  # type: ignore[arg-type]
    assert store.current_lease(TEAM) == lease  # not extended, not proved, not released
    assert store.current_epoch(TEAM) == lease.epoch
    assert store.events(TEAM) == before
    assert store.renew_lease(TEAM, "alice", lease.epoch, 60.0, token=LEASE_TOKEN).ttl == 60.0
    assert store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN) is True


def test_a_token_holds_only_the_lease_it_was_claimed_with(store: Store) -> None:
    first = store.claim_lease(TEAM, "alice", 10.0, token=OTHER_TOKEN)
    assert store.release_lease(TEAM, "alice", first.epoch, token=OTHER_TOKEN) is True
    second = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)  # same holder
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", second.epoch, 10.0, token=OTHER_TOKEN)
    assert store.release_lease(TEAM, "alice", second.epoch, token=OTHER_TOKEN) is False
    assert store.current_lease(TEAM) == second


def test_a_seized_lease_is_held_with_the_seizers_token(store: Store) -> None:
    forged = store.claim_lease(TEAM, "mallory", 10.0, token=OTHER_TOKEN)
    seized = store.seize_lease(TEAM, "bob", 10.0, over=forged, token=LEASE_TOKEN)
    with pytest.raises(LeaseLost):  # the refused holder's token holds nothing now
        store.renew_lease(TEAM, "bob", seized.epoch, 10.0, token=OTHER_TOKEN)
    assert store.release_lease(TEAM, "bob", seized.epoch, token=OTHER_TOKEN) is False
    proved = store.prove_lease(TEAM, "bob", seized.epoch, PROOF, token=LEASE_TOKEN)
    assert proved.proof == PROOF
    assert store.release_lease(TEAM, "bob", seized.epoch, token=LEASE_TOKEN) is True


def test_releasing_a_lapsed_lease_still_needs_its_token(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    wait_out()
    assert store.release_lease(TEAM, "alice", lease.epoch, token=OTHER_TOKEN) is False
    assert store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN) is True


@pytest.mark.parametrize(
    "token", ["", "too-short", "é" * 20, "a b\nc" * 5, "x" * 257, None, 42, b"bytes-token-0123456"]
)
def test_a_malformed_token_is_refused_at_the_claim_naming_the_field(
    store: Store, token: object
) -> None:
    with pytest.raises(ProtocolError) as caught:
        store.claim_lease(TEAM, "alice", 10.0, token=token)  # type: ignore[arg-type]
    assert caught.value.field == "token"
    assert "16 to 256" in str(caught.value)
    if isinstance(token, str) and token:
        assert token not in str(caught.value)  # a secret is never shown back
    assert (store.current_lease(TEAM), store.current_epoch(TEAM)) == (None, 0)
    held = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    with pytest.raises(ProtocolError, match="token"):
        store.seize_lease(TEAM, "bob", 10.0, over=held, token=token)  # type: ignore[arg-type]
    assert store.current_lease(TEAM) == held
    assert [e.kind for e in store.events(TEAM)] == ["lease.claimed"]


def test_no_read_and_no_event_carries_the_token(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    store.prove_lease(TEAM, "alice", lease.epoch, PROOF, token=LEASE_TOKEN)
    store.renew_lease(TEAM, "alice", lease.epoch, 10.0, token=LEASE_TOKEN)
    seen = [repr(lease), repr(store.current_lease(TEAM))]
    store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN)
    seen += [repr(e) for e in store.events(TEAM)]
    assert not [line for line in seen if LEASE_TOKEN in line]


# --- proofs and seizure: the primitives members enforce lease credentials with ----------

PROOF = "c2lnbmVkIGJ5IHRoZSBsZWFkIGtleQ=="


def test_a_claimed_lease_carries_no_proof_until_its_holder_proves_it(store: Store) -> None:
    before = store.now()
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    after = store.now()
    assert lease.proof is None
    assert before <= lease.claimed_at <= after
    assert store.current_lease(TEAM) == lease
    proved = store.prove_lease(TEAM, "alice", lease.epoch, PROOF, token=LEASE_TOKEN)
    assert (proved.holder, proved.epoch, proved.proof) == ("alice", lease.epoch, PROOF)
    assert (proved.expires_at, proved.claimed_at) == (lease.expires_at, lease.claimed_at)
    assert store.current_lease(TEAM) == proved
    assert store.current_epoch(TEAM) == lease.epoch  # proving is no new epoch
    [event] = [e for e in store.events(TEAM) if e.kind == "lease.proved"]
    assert (event.epoch, event.data) == (lease.epoch, {"holder": "alice"})


def test_only_the_holder_of_the_live_lease_at_its_epoch_can_prove_it(store: Store) -> None:
    with pytest.raises(LeaseLost):
        store.prove_lease(TEAM, "alice", 1, PROOF, token=LEASE_TOKEN)  # never claimed
    lease = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    for holder, epoch in (("bob", lease.epoch), ("alice", lease.epoch + 1)):
        with pytest.raises(LeaseLost):
            store.prove_lease(TEAM, holder, epoch, PROOF, token=LEASE_TOKEN)
    current = store.current_lease(TEAM)
    assert current is not None and current.proof is None
    wait_out()
    with pytest.raises(LeaseLost):
        store.prove_lease(TEAM, "alice", lease.epoch, PROOF, token=LEASE_TOKEN)  # lapsed
    assert not [e for e in store.events(TEAM) if e.kind == "lease.proved"]


@pytest.mark.parametrize("proof", ["", "é" * 10, "a\nb", "x" * 513, 42, None])
def test_a_malformed_proof_is_refused_naming_the_field(store: Store, proof: object) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    with pytest.raises(ProtocolError) as caught:
        store.prove_lease(TEAM, "alice", lease.epoch, proof, token=LEASE_TOKEN)  # type: ignore[arg-type]
    assert caught.value.field == "proof"
    assert store.current_lease(TEAM) == lease


def test_renewal_keeps_the_proof_and_the_claim_time(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    store.prove_lease(TEAM, "alice", lease.epoch, PROOF, token=LEASE_TOKEN)
    renewed = store.renew_lease(TEAM, "alice", lease.epoch, 20.0, token=LEASE_TOKEN)
    assert (renewed.proof, renewed.claimed_at, renewed.ttl) == (PROOF, lease.claimed_at, 20.0)
    assert store.current_lease(TEAM) == renewed


def test_a_new_lease_never_inherits_an_old_proof(store: Store) -> None:
    first = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    store.prove_lease(TEAM, "alice", first.epoch, PROOF, token=LEASE_TOKEN)
    wait_out()
    second = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    assert second.proof is None and second.claimed_at > first.claimed_at
    store.prove_lease(TEAM, "alice", second.epoch, PROOF, token=LEASE_TOKEN)
    store.release_lease(TEAM, "alice", second.epoch, token=LEASE_TOKEN)
    third = store.claim_lease(TEAM, "bob", 10.0, token=LEASE_TOKEN)
    current = store.current_lease(TEAM)
    assert third.proof is None and current is not None and current.proof is None


def test_seize_replaces_a_refused_lease_at_a_new_epoch(store: Store) -> None:
    forged = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    seized = store.seize_lease(TEAM, "bob", 5.0, over=forged, token=LEASE_TOKEN)
    assert (seized.holder, seized.epoch, seized.ttl, seized.proof) == (
        "bob",
        forged.epoch + 1,
        5.0,
        None,
    )
    assert store.current_lease(TEAM) == seized
    assert store.current_epoch(TEAM) == seized.epoch
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", forged.epoch, 10.0, token=LEASE_TOKEN)
    with pytest.raises(LeaseLost):
        store.prove_lease(TEAM, "alice", forged.epoch, PROOF, token=LEASE_TOKEN)
    [event] = [e for e in store.events(TEAM) if e.kind == "lease.claimed" and e.epoch == 2]
    assert event.data == {"holder": "bob", "ttl": 5.0, "over_holder": "alice", "over_epoch": 1}


def test_of_two_seizing_one_lease_only_the_first_wins(store: Store) -> None:
    forged = store.claim_lease(TEAM, "mallory", 10.0, token=LEASE_TOKEN)
    won = store.seize_lease(TEAM, "bob", 10.0, over=forged, token=LEASE_TOKEN)
    with pytest.raises(Conflict):
        store.seize_lease(TEAM, "carol", 10.0, over=forged, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) == won
    assert store.current_epoch(TEAM) == won.epoch


def test_seize_refuses_a_lease_that_changed_since_it_was_read(store: Store) -> None:
    elsewhere = store.claim_lease(OTHER_TEAM, "x", 10.0, token=LEASE_TOKEN)
    with pytest.raises(Conflict):  # vacant: there is nothing to seize, claim it
        store.seize_lease(TEAM, "bob", 10.0, over=elsewhere, token=LEASE_TOKEN)
    seen = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    proved = store.prove_lease(
        TEAM, "alice", seen.epoch, PROOF, token=LEASE_TOKEN
    )  # proved meanwhile
    with pytest.raises(Conflict):
        store.seize_lease(TEAM, "bob", 10.0, over=seen, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) == proved
    store.release_lease(TEAM, "alice", seen.epoch, token=LEASE_TOKEN)
    again = store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)  # same holder, another epoch
    with pytest.raises(Conflict):
        store.seize_lease(TEAM, "bob", 10.0, over=seen, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) == again
    assert store.current_epoch(TEAM) == again.epoch


def test_seize_of_a_lapsed_lease_still_on_record_succeeds(store: Store) -> None:
    forged = store.claim_lease(TEAM, "alice", SHORT_TTL, token=LEASE_TOKEN)
    wait_out()
    seized = store.seize_lease(TEAM, "bob", 10.0, over=forged, token=LEASE_TOKEN)
    assert (seized.holder, seized.epoch) == ("bob", forged.epoch + 1)


def test_seize_chooses_the_epoch_as_a_claim_does(store: Store) -> None:
    from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP

    store.join(TEAM, "f1", ttl=30.0, highest_epoch=17)
    store.join(TEAM, "pusher", ttl=30.0, highest_epoch=10**12)  # beyond the jump: ignored
    forged = store.claim_lease(TEAM, "mallory", 10.0, token=LEASE_TOKEN)
    assert forged.epoch == 18
    seized = store.seize_lease(TEAM, "bob", 10.0, over=forged, at_least=40, token=LEASE_TOKEN)
    assert seized.epoch == 41
    store.join(TEAM, "edge", ttl=30.0, highest_epoch=41 + MAX_EPOCH_JUMP)
    assert (
        store.seize_lease(TEAM, "carol", 10.0, over=seized, token=LEASE_TOKEN).epoch
        == 42 + MAX_EPOCH_JUMP
    )
    current = store.current_lease(TEAM)
    assert current is not None
    for far in (current.epoch + MAX_EPOCH_JUMP + 1, MAX_EPOCH):
        with pytest.raises(ProtocolError, match="at_least"):
            store.seize_lease(TEAM, "dave", 10.0, over=current, at_least=far, token=LEASE_TOKEN)
    with pytest.raises(ProtocolError, match="at_least"):
        store.seize_lease(TEAM, "dave", 10.0, over=current, at_least=-1, token=LEASE_TOKEN)
    with pytest.raises(ProtocolError, match="ttl"):
        store.seize_lease(TEAM, "dave", 0, over=current, token=LEASE_TOKEN)
    assert store.current_lease(TEAM) == current  # refused calls changed nothing
