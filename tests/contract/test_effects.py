"""Idempotency ledger: a side effect runs once per key; its result is kept."""

from __future__ import annotations

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import EffectInProgress, ProtocolError, StaleEpoch
from tenure.store import Store

from ._support import OTHER_TEAM, SHORT_TTL, TEAM, last_seq, wait_out

KEY = "t1:attempt-1"


def epoch_of(store: Store, team: str = TEAM) -> int:
    return store.claim_lease(team, "leader", 30.0, token=LEASE_TOKEN).epoch


def test_first_begin_returns_run(store: Store) -> None:
    epoch = epoch_of(store)
    ticket = store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    assert (ticket.key, ticket.status) == (KEY, "run")
    assert store.effect_lookup(TEAM, KEY) is None


def test_begin_after_finish_returns_done_with_the_result(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    result = {"status": "completed", "artifact": {"files": ["a.py"]}, "n": 3}
    finished = store.effect_finish(TEAM, KEY, holder="w1", result=result)
    assert (finished.key, finished.status, finished.result) == (KEY, "done", result)
    for holder in ("w1", "w2"):
        again = store.effect_begin(TEAM, KEY, epoch=epoch, holder=holder, claim_seconds=10.0)
        assert (again.key, again.status, again.result) == (KEY, "done", result)


def test_another_holder_gets_effect_in_progress_while_the_claim_is_live(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=10.0)
    assert store.effect_lookup(TEAM, KEY) is None


def test_another_holder_takes_over_after_the_claim_expires(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=SHORT_TTL)
    wait_out()
    ticket = store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=10.0)
    assert ticket.status == "run"
    # Now w2 owns it: w1 is the one kept out.
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    store.effect_finish(TEAM, KEY, holder="w2", result="by w2")
    assert (
        store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0).result
        == "by w2"
    )


def test_abort_lets_the_next_try_run(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    store.effect_abort(TEAM, KEY, holder="w1")
    assert store.effect_lookup(TEAM, KEY) is None
    ticket = store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=10.0)
    assert ticket.status == "run"


def test_abort_by_a_non_owner_keeps_the_claim(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    store.effect_abort(TEAM, KEY, holder="w2")
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=10.0)


def test_abort_does_not_undo_a_done_effect(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    store.effect_finish(TEAM, KEY, holder="w1", result=1)
    store.effect_abort(TEAM, KEY, holder="w1")
    lookup = store.effect_lookup(TEAM, KEY)
    assert lookup is not None
    assert lookup.result == 1
    assert store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=10.0).status == (
        "done"
    )


def test_a_done_key_keeps_its_first_result(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    store.effect_finish(TEAM, KEY, holder="w1", result={"first": True})
    second = store.effect_finish(TEAM, KEY, holder="w1", result={"first": False})
    assert second.status == "done"
    assert second.result == {"first": True}
    lookup = store.effect_lookup(TEAM, KEY)
    assert lookup is not None
    assert lookup.result == {"first": True}


def test_begin_with_a_stale_epoch_is_refused(store: Store) -> None:
    old = epoch_of(store)
    store.release_lease(TEAM, "leader", old, token=LEASE_TOKEN)
    new = store.claim_lease(TEAM, "leader2", 30.0, token=LEASE_TOKEN).epoch
    seq = last_seq(store)
    with pytest.raises(StaleEpoch) as caught:
        store.effect_begin(TEAM, KEY, epoch=old, holder="w1", claim_seconds=10.0)
    assert (caught.value.epoch, caught.value.current) == (old, new)
    assert store.events(TEAM, after=seq) == []
    # The refused try claimed nothing: a current-epoch caller runs it.
    assert store.effect_begin(TEAM, KEY, epoch=new, holder="w2", claim_seconds=10.0).status == (
        "run"
    )


def test_begin_with_a_stale_epoch_is_refused_even_when_done(store: Store) -> None:
    old = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=old, holder="w1", claim_seconds=10.0)
    store.effect_finish(TEAM, KEY, holder="w1", result="r")
    store.release_lease(TEAM, "leader", old, token=LEASE_TOKEN)
    store.claim_lease(TEAM, "leader2", 30.0, token=LEASE_TOKEN)
    with pytest.raises(StaleEpoch):
        store.effect_begin(TEAM, KEY, epoch=old, holder="w1", claim_seconds=10.0)


def test_lookup_returns_the_result_of_a_done_key_only(store: Store) -> None:
    epoch = epoch_of(store)
    assert store.effect_lookup(TEAM, KEY) is None
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    assert store.effect_lookup(TEAM, KEY) is None
    store.effect_finish(TEAM, KEY, holder="w1", result=[1, "two", None])
    lookup = store.effect_lookup(TEAM, KEY)
    assert lookup is not None
    assert (lookup.key, lookup.status, lookup.result) == (KEY, "done", [1, "two", None])


def test_keys_and_teams_are_separate(store: Store) -> None:
    epoch = epoch_of(store)
    other_epoch = epoch_of(store, OTHER_TEAM)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=10.0)
    assert (
        store.effect_begin(
            TEAM, "t1:attempt-2", epoch=epoch, holder="w2", claim_seconds=10.0
        ).status
        == "run"
    )
    assert (
        store.effect_begin(
            OTHER_TEAM, KEY, epoch=other_epoch, holder="w2", claim_seconds=10.0
        ).status
        == "run"
    )
    store.effect_finish(OTHER_TEAM, KEY, holder="w2", result="b")
    assert store.effect_lookup(TEAM, KEY) is None


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_non_positive_claim_seconds_raises_protocol_error(store: Store, seconds: float) -> None:
    epoch = epoch_of(store)
    with pytest.raises(ProtocolError) as caught:
        store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=seconds)
    assert caught.value.field == "claim_seconds"
    assert store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=10.0).status == (
        "run"
    )


def test_a_live_members_claim_lapses_with_its_heartbeat(store: Store) -> None:
    """A holder that died mid-effect does not keep the key for the whole claim time."""
    store.join(TEAM, "w1", ttl=SHORT_TTL, incarnation="a")
    store.effect_begin(TEAM, "k", epoch=0, holder="w1", claim_seconds=60.0)
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, "k", epoch=0, holder="w2", claim_seconds=60.0)
    wait_out()
    assert store.effect_begin(TEAM, "k", epoch=0, holder="w2", claim_seconds=60.0).status == "run"


def test_a_live_members_claim_holds_while_it_beats(store: Store) -> None:
    store.join(TEAM, "w1", ttl=60.0, incarnation="a")
    store.effect_begin(TEAM, "k", epoch=0, holder="w1", claim_seconds=60.0)
    store.heartbeat(TEAM, "w1", ttl=60.0, incarnation="a")
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, "k", epoch=0, holder="w2", claim_seconds=60.0)


def test_a_claim_of_a_replaced_incarnation_lapses(store: Store) -> None:
    store.join(TEAM, "w1", ttl=SHORT_TTL, incarnation="old")
    store.effect_begin(TEAM, "k", epoch=0, holder="w1", claim_seconds=60.0)
    wait_out()
    store.join(TEAM, "w1", ttl=60.0, incarnation="new")
    assert store.effect_begin(TEAM, "k", epoch=0, holder="w2", claim_seconds=60.0).status == "run"
