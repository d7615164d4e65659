"""Several writes in one atomic step (``commit``) and an attempt begun in one
(``begin_attempt``): the same checks, writes and events as the single calls, all or
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import Conflict, EffectInProgress, NotFound, ProtocolError, StaleEpoch
from tenure.protocol.limits import MAX_MESSAGE_BYTES
from tenure.store import Store
from tenure.store.writes import Ack, Expect, Move, Note, Record, Send

from ._support import TEAM, last_seq, new_events

KEY = "t1:attempt-1"


def epoch_of(store: Store) -> int:
    return store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch


def queued(store: Store, epoch: int, *, attempt: int = 1, assignee: str | None = "w1") -> None:
    store.create_task(TEAM, "t1", epoch=epoch, spec={"goal": "g"})
    store.transition(
        TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", attempt=attempt, assignee=assignee
    )


def snapshot(store: Store) -> tuple[Any, ...]:
    """What a refused commit must leave as it was."""
    tasks = [(t.task_id, t.state, t.version, t.result, t.data) for t in store.tasks(TEAM)]
    return tasks, store.effect_lookup(TEAM, KEY), last_seq(store, TEAM)


# --- commit ----------------------------------------------------------------------------


def test_a_commit_makes_every_write_and_answers_as_each_single_call(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running")
    store.send(TEAM, "work", {"type": "x", "n": 1})
    [delivery] = store.receive(TEAM, "work", consumer="w1", visibility_timeout=30.0)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=30.0)
    before = last_seq(store, TEAM)
    result = {"status": "completed", "artifact": {"n": 1}}
    answers = store.commit(
        TEAM,
        [
            Record(KEY, "w1", result),
            Move("t1", epoch, ("running",), "review", None, {"result": result}),
            Note("verdict", {"task_id": "t1", "passed": True}, epoch),
            Move("t1", epoch, ("review",), "done", None, {"reason": "accepted"}),
            Ack("work", delivery.message_id),
            Send("leader", {"type": "y", "epoch": epoch}),
        ],
    )
    ticket, review, seq, done, acked, sent = answers
    assert (ticket.status, ticket.result) == ("done", result)
    assert (review.state, review.result) == ("review", result)
    assert (done.state, done.version, done.reason) == ("done", review.version + 1, "accepted")
    assert isinstance(seq, int) and seq > before
    assert acked is True and isinstance(sent, str)
    assert store.get_task(TEAM, "t1").state == "done"
    assert store.effect_lookup(TEAM, KEY) is not None
    assert store.receive(TEAM, "work", consumer="w2", visibility_timeout=30.0) == []
    [message] = store.receive(TEAM, "leader", consumer="l", visibility_timeout=30.0)
    assert (message.message_id, message.payload) == (sent, {"type": "y", "epoch": epoch})
    events = new_events(store, before)
    assert [e.kind for e in events] == [
        "effect.done",
        "task.transition",
        "verdict",
        "task.transition",
        "message.sent",
    ]
    assert events[1].data["from"] == "running" and events[3].data["from"] == "review"
    assert events[2].seq == seq


@pytest.mark.parametrize(
    "second",
    [
        Move("t1", 1, ("running",), "done"),  # the first move leaves it in review
        Move("t1", 1, ("review",), "done", version=99),
        Move("nope", 1, ("queued",), "running"),
    ],
    ids=["state", "version", "missing"],
)
def test_a_refused_move_writes_nothing_at_all(store: Store, second: Move) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running")
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=30.0)
    before = snapshot(store)
    writes = [
        Record(KEY, "w1", {"status": "completed"}),
        Move("t1", epoch, ("running",), "review"),
        Note("verdict", {"passed": True}),
        Move(second.task_id, epoch, second.expect, second.to, second.version),
    ]
    with pytest.raises(NotFound if second.task_id == "nope" else Conflict):
        store.commit(TEAM, writes)
    assert snapshot(store) == before


def test_a_stale_move_writes_nothing_at_all(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    store.release_lease(TEAM, "leader", epoch, token=LEASE_TOKEN)
    newer = store.claim_lease(TEAM, "other", 30.0, token=LEASE_TOKEN).epoch
    before = snapshot(store)
    with pytest.raises(StaleEpoch) as refused:
        store.commit(
            TEAM,
            [Note("x", {}), Move("t1", epoch, ("queued",), "running")],
        )
    assert refused.value.current == newer
    assert snapshot(store) == before


def test_an_oversized_send_or_event_writes_nothing_at_all(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    before = snapshot(store)
    huge = {"type": "x", "blob": "a" * (MAX_MESSAGE_BYTES + 1)}
    for last in (Send("work", huge), Note("x", {"blob": "a" * (MAX_MESSAGE_BYTES + 1)})):
        with pytest.raises(ProtocolError):
            store.commit(TEAM, [Move("t1", epoch, ("queued",), "running"), last])
        assert snapshot(store) == before


def test_a_record_keeps_the_first_result(store: Store) -> None:
    epoch = epoch_of(store)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=30.0)
    store.effect_finish(TEAM, KEY, holder="w1", result="first")
    [ticket] = store.commit(TEAM, [Record(KEY, "w2", "second")])
    assert ticket.result == "first"


def test_an_empty_commit_does_nothing(store: Store) -> None:
    assert store.commit(TEAM, []) == []


# --- begin_attempt ---------------------------------------------------------------------


def begin(store: Store, epoch: int, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "epoch": epoch,
        "attempt": 1,
        "holder": "w1",
        "claim_seconds": 30.0,
    }
    return store.begin_attempt(TEAM, "t1", KEY, **{**args, **kw})


def test_begin_claims_the_key_and_marks_the_task_running(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    before = last_seq(store, TEAM)
    started = begin(store, epoch, data={"mark": 1})
    assert started.outcome == "run"
    assert started.task is not None
    assert (started.task.state, started.task.assignee, started.task.data) == (
        "running",
        "w1",
        {"mark": 1},
    )
    assert store.get_task(TEAM, "t1") == started.task
    assert abs(started.now - store.now()) < 5
    events = new_events(store, before)
    assert [e.kind for e in events] == ["effect.claimed", "task.transition"]
    assert events[1].data == {
        "task_id": "t1",
        "from": "queued",
        "to": "running",
        "version": 3,
        "data": True,
    }
    with pytest.raises(EffectInProgress):  # the key is ours now: another waits
        store.effect_begin(TEAM, KEY, epoch=epoch, holder="w2", claim_seconds=30.0)


def test_begin_in_queue_mode_takes_the_task(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch, assignee=None)
    started = begin(store, epoch, holder="w2", take=True)
    assert started.outcome == "run" and started.task.assignee == "w2"
    events = new_events(store, last_seq(store, TEAM) - 1)
    assert events[-1].data["assignee"] == "w2"


def test_begin_replays_a_recorded_result(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w1", claim_seconds=30.0)
    store.effect_finish(TEAM, KEY, holder="w1", result={"done": True})
    before = snapshot(store)
    started = begin(store, epoch)
    assert (started.outcome, started.result) == ("replayed", {"done": True})
    assert snapshot(store) == before


@pytest.mark.parametrize("case", ["missing", "other-attempt", "other-assignee", "cancelled"])
def test_begin_writes_nothing_for_an_attempt_that_is_not_ours(store: Store, case: str) -> None:
    epoch = epoch_of(store)
    if case != "missing":
        queued(store, epoch, attempt=2 if case == "other-attempt" else 1)
    if case == "other-assignee":
        store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", assignee="w9")
    if case == "cancelled":
        store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="cancelled")
    before = snapshot(store)
    started = begin(store, epoch)
    assert started.outcome == "outdated"
    assert (started.task is None) == (case == "missing")
    assert snapshot(store) == before


def test_begin_is_fenced_by_a_stale_epoch(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    store.release_lease(TEAM, "leader", epoch, token=LEASE_TOKEN)
    newer = store.claim_lease(TEAM, "other", 30.0, token=LEASE_TOKEN).epoch
    before = snapshot(store)
    started = begin(store, epoch)
    assert (started.outcome, started.current) == ("fenced", newer)
    assert snapshot(store) == before


def test_begin_waits_for_another_live_holder(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch, assignee=None)
    store.effect_begin(TEAM, KEY, epoch=epoch, holder="w9", claim_seconds=30.0)
    before = snapshot(store)
    started = begin(store, epoch, take=True)
    assert (started.outcome, started.holder) == ("in_progress", "w9")
    assert snapshot(store) == before


def test_begin_again_by_the_same_holder_runs_again(store: Store) -> None:
    """A restarted member resumes its own work (``effect_begin``'s rule)."""
    epoch = epoch_of(store)
    queued(store, epoch)
    assert begin(store, epoch).outcome == "run"
    again = begin(store, epoch)
    assert again.outcome == "run" and again.task.state == "running"


# --- get_tasks -------------------------------------------------------------------------


def test_get_tasks_reads_the_named_tasks_that_exist_in_the_order_named(store: Store) -> None:
    epoch = epoch_of(store)
    for task_id in ("a", "b", "c"):
        store.create_task(TEAM, task_id, epoch=epoch, spec={"goal": task_id})
    moved = store.transition(TEAM, "b", epoch=epoch, expect=["queued"], to="running")
    found = store.get_tasks(TEAM, ["c", "nope", "b", "c"])
    assert found == [store.get_task(TEAM, "c"), moved]
    assert store.get_tasks(TEAM, []) == []


def test_a_transition_event_says_the_version_it_left(store: Store) -> None:
    epoch = epoch_of(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={"goal": "g"})
    before = last_seq(store, TEAM)
    moved = store.commit(
        TEAM,
        [
            Move("t1", epoch, ("queued",), "running"),
            Move("t1", epoch, ("running",), "review"),
        ],
    )
    versions = [e.data["version"] for e in new_events(store, before)]
    assert versions == [moved[0].version, moved[1].version] == [2, 3]


def test_an_expect_holds_the_commit_to_what_the_step_read(store: Store) -> None:
    epoch = epoch_of(store)
    queued(store, epoch)
    read = store.get_task(TEAM, "t1")
    [guard, seq] = store.commit(TEAM, [Expect("t1", read.version), Note("seen", {"n": 1})])
    assert guard is None and isinstance(seq, int)
    store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="queued")  # meanwhile
    before = snapshot(store)
    with pytest.raises(Conflict):
        store.commit(TEAM, [Expect("t1", read.version), Note("seen", {"n": 2})])
    with pytest.raises(NotFound):
        store.commit(TEAM, [Expect("nope", 1), Note("seen", {"n": 3})])
    assert snapshot(store) == before
