"""Events: every change appends one, in one store-wide order."""

from __future__ import annotations

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import Conflict, EffectInProgress, LeaseLost
from tenure.store import Store

from ._support import OTHER_TEAM, TEAM, kinds, last_seq, wait_out


def test_a_fresh_store_has_no_events_or_teams(store: Store) -> None:
    assert store.events() == []
    assert store.events(TEAM) == []
    assert store.teams() == []


def test_append_event_returns_its_seq_and_records_it(store: Store) -> None:
    before = store.now()
    seq = store.append_event(TEAM, "verdict.accepted", {"task_id": "t1", "by": ["judge"]}, epoch=3)
    after = store.now()
    [event] = store.events(TEAM)
    assert event.seq == seq
    assert (event.team, event.kind, event.epoch) == (TEAM, "verdict.accepted", 3)
    assert event.data == {"task_id": "t1", "by": ["judge"]}
    assert before <= event.at <= after


def test_append_event_without_epoch(store: Store) -> None:
    seq = store.append_event(TEAM, "fault.seen", {})
    [event] = store.events(TEAM)
    assert (event.seq, event.epoch, event.data) == (seq, None, {})


def test_seq_strictly_increases_across_teams(store: Store) -> None:
    seqs = [
        store.append_event(team, "k", {"i": i}) for i in range(6) for team in (TEAM, OTHER_TEAM)
    ]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    listed = [e.seq for e in store.events()]
    assert listed == seqs


def test_events_filter_by_team(store: Store) -> None:
    store.append_event(TEAM, "a", {})
    store.append_event(OTHER_TEAM, "b", {})
    store.append_event(TEAM, "c", {})
    assert kinds(store, TEAM) == ["a", "c"]
    assert kinds(store, OTHER_TEAM) == ["b"]
    assert kinds(store, None) == ["a", "b", "c"]


def test_after_returns_only_later_events(store: Store) -> None:
    seqs = [store.append_event(TEAM, f"k{i}", {}) for i in range(5)]
    assert [e.seq for e in store.events(TEAM, after=seqs[1])] == seqs[2:]
    assert [e.seq for e in store.events(None, after=seqs[1])] == seqs[2:]
    assert store.events(TEAM, after=seqs[-1]) == []


def test_limit_caps_the_page_and_after_pages_on(store: Store) -> None:
    seqs = [store.append_event(TEAM, "k", {"i": i}) for i in range(7)]
    page = store.events(TEAM, limit=3)
    assert [e.seq for e in page] == seqs[:3]
    page = store.events(TEAM, after=page[-1].seq, limit=3)
    assert [e.seq for e in page] == seqs[3:6]


def test_a_limit_below_one_returns_no_events(store: Store) -> None:
    for i in range(3):
        store.append_event("t", "x", {"i": i})
    for limit in (0, -1, -5):
        assert store.events(limit=limit) == []
        assert store.events("t", limit=limit) == []
    assert len(store.events("t", limit=2)) == 2


def test_lease_changes_append_events(store: Store) -> None:
    lease = store.claim_lease(TEAM, "alice", 30.0, token=LEASE_TOKEN)
    store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN)
    claimed, released = store.events(TEAM)
    assert (claimed.kind, claimed.epoch, claimed.data.get("holder")) == (
        "lease.claimed",
        lease.epoch,
        "alice",
    )
    assert (released.kind, released.epoch) == ("lease.released", lease.epoch)


def test_membership_changes_append_events(store: Store) -> None:
    store.join(TEAM, "m1", ttl=30.0, priority=2, capabilities=["lead"])
    store.leave(TEAM, "m1")
    joined, left = store.events(TEAM)
    assert joined.kind == "member.joined"
    assert joined.data.get("member") == "m1"
    assert left.kind == "member.left"
    assert left.data.get("member") == "m1"


def test_task_changes_append_events(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch
    seq = last_seq(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running", assignee="w1")
    created, moved = store.events(TEAM, after=seq)
    assert (created.kind, created.epoch, created.data.get("task_id")) == (
        "task.created",
        epoch,
        "t1",
    )
    assert (moved.kind, moved.epoch, moved.data.get("task_id")) == ("task.transition", epoch, "t1")
    assert (moved.data.get("from"), moved.data.get("to")) == ("queued", "running")


def test_effect_changes_append_events(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch
    seq = last_seq(store)
    store.effect_begin(TEAM, "k1", epoch=epoch, holder="w1", claim_seconds=30.0)
    store.effect_abort(TEAM, "k1", holder="w1")
    store.effect_begin(TEAM, "k1", epoch=epoch, holder="w2", claim_seconds=30.0)
    store.effect_finish(TEAM, "k1", holder="w2", result=1)
    assert kinds(store, after=seq) == [
        "effect.claimed",
        "effect.aborted",
        "effect.claimed",
        "effect.done",
    ]
    assert all(e.data.get("key") == "k1" for e in store.events(TEAM, after=seq))


def test_message_changes_append_events(store: Store) -> None:
    message_id = store.send(TEAM, "q", {"type": "task.assign"})
    store.receive(TEAM, "q", consumer="c1", visibility_timeout=0.05, max_deliveries=1)
    wait_out(0.05, 0.05)
    store.receive(TEAM, "q", consumer="c1", visibility_timeout=0.05, max_deliveries=1)
    found = [e for e in store.events(TEAM) if e.kind.startswith("message.")]
    assert [e.kind for e in found] == ["message.sent", "message.dead_lettered"]
    assert all(e.data.get("id") == message_id for e in found)


def test_refused_changes_append_no_event(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "alice", 30.0, token=LEASE_TOKEN).epoch
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    store.effect_begin(TEAM, "k", epoch=epoch, holder="w1", claim_seconds=30.0)
    seq = last_seq(store)
    with pytest.raises(Conflict):
        store.claim_lease(TEAM, "bob", 30.0, token=LEASE_TOKEN)
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "bob", epoch, 30.0, token=LEASE_TOKEN)
    with pytest.raises(Conflict):
        store.create_task(TEAM, "t1", epoch=epoch, spec={})
    with pytest.raises(Conflict):
        store.transition(TEAM, "t1", epoch=epoch, expect=["running"], to="review")
    with pytest.raises(EffectInProgress):
        store.effect_begin(TEAM, "k", epoch=epoch, holder="w2", claim_seconds=30.0)
    assert store.events(after=seq) == []


def test_teams_lists_every_team_with_state(store: Store) -> None:
    store.claim_lease("team-x", "alice", 30.0, token=LEASE_TOKEN)
    store.join("team-y", "m1", ttl=30.0)
    assert {"team-x", "team-y"} <= set(store.teams())


def test_teams_includes_a_team_with_only_messages_or_events(store: Store) -> None:
    store.send("team-m", "q", {"i": 1})
    store.append_event("team-e", "note", {})
    assert {"team-m", "team-e"} <= set(store.teams())


def test_last_event_seq_is_the_newest_event_of_that_team_only(store: Store) -> None:
    assert store.last_event_seq(TEAM) == 0
    mine = [store.append_event(TEAM, "k", {"i": i}) for i in range(3)]
    theirs = store.append_event(OTHER_TEAM, "k", {})
    assert store.last_event_seq(TEAM) == mine[-1] == store.events(TEAM)[-1].seq
    assert store.last_event_seq(OTHER_TEAM) == theirs
    assert store.last_event_seq("nobody") == 0


def test_last_event_seq_of_the_base_class_pages_through_the_log(store: Store) -> None:
    """The contract's fallback (for stores without an index) agrees with the backend's."""
    for i in range(1003):
        store.append_event(TEAM, "k", {"i": i})
    assert Store.last_event_seq(store, TEAM) == store.last_event_seq(TEAM)
    assert store.last_event_seq(TEAM) == store.events(TEAM, after=1000)[-1].seq


def test_trim_events_deletes_only_that_teams_older_events(store: Store) -> None:
    mine = [store.append_event(TEAM, "k", {"i": i}) for i in range(5)]
    theirs = [store.append_event(OTHER_TEAM, "k", {"i": i}) for i in range(3)]
    assert store.trim_events(TEAM, before_seq=mine[3]) == 3
    assert [e.seq for e in store.events(TEAM)] == mine[3:]
    assert [e.seq for e in store.events(OTHER_TEAM)] == theirs
    assert [e.seq for e in store.events()] == sorted([*mine[3:], *theirs])  # store-wide too
    assert store.last_event_seq(TEAM) == mine[-1]
    assert store.trim_events(TEAM, before_seq=mine[3]) == 0  # nothing left below it
    assert store.trim_events("nobody", before_seq=10**6) == 0


def test_trimmed_events_leave_the_register_and_new_events_alone(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "alice", 30.0, token=LEASE_TOKEN).epoch
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    newest = store.last_event_seq(TEAM)
    assert store.trim_events(TEAM, before_seq=newest + 1) >= 2  # lease claim, task created
    assert store.events(TEAM) == []
    assert store.get_task(TEAM, "t1").state == "queued"
    seq = store.append_event(TEAM, "after", {})
    assert seq > newest and [e.kind for e in store.events(TEAM)] == ["after"]
