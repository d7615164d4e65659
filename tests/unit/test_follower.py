"""The follower, driven one delivery at a time with ``poll_once`` on a real store.

Envelopes are built the way a leader builds them (register first, then
``envelope_for`` and the mailbox), so every test exercises the same fencing a
live team does: the follower's own epoch memory and the store's compare-and-set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import LEASE_TOKEN
from tenure.executors import SleepExecutor, TaskContext, coerce_result
from tenure.protocol import TaskEnvelope, TaskResult, parse_message
from tenure.protocol.errors import NotFound
from tenure.roles import LEADER_QUEUE, Follower, FollowerConfig, Mailbox, envelope_for, member_queue
from tenure.store import DEFAULT_MAX_DELIVERIES, Event, Store

TEAM = "unit-follower"
CRITERIA = ["the total is the sum of the line items", "every price has a source"]


class Recording:
    """An executor that records each call and returns what ``produce`` makes of it."""

    def __init__(self, produce: Callable[[TaskEnvelope, TaskContext], Any] | None = None) -> None:
        self.calls: list[TaskEnvelope] = []
        self.produce = produce or (lambda env, ctx: {"done": env.task_id})

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        self.calls.append(envelope)
        return coerce_result(envelope, self.produce(envelope, ctx))


def lead(store: Store, holder: str = "leader") -> int:
    """Take the team's lease (releasing whoever holds it) and return the new epoch."""
    current = store.current_lease(TEAM)
    if current is not None:
        store.release_lease(TEAM, current.holder, current.epoch, token=LEASE_TOKEN)
    return store.claim_lease(TEAM, holder, 60.0, token=LEASE_TOKEN).epoch


def assign(
    store: Store,
    task_id: str,
    worker: str = "w1",
    *,
    epoch: int,
    send: bool = True,
    **spec: Any,
) -> TaskEnvelope:
    """Register (or re-assign) a task at ``epoch`` as a leader would, and send its envelope."""
    try:
        record = store.get_task(TEAM, task_id)
    except NotFound:
        full = {"goal": f"do {task_id}", "acceptance_criteria": CRITERIA, **spec}
        record = store.create_task(TEAM, task_id, epoch=epoch, spec=full)
    record = store.transition(
        TEAM,
        task_id,
        epoch=epoch,
        expect=[record.state],
        to="queued",
        version=record.version,
        assignee=worker,
        attempt=record.attempt + 1,
    )
    envelope = envelope_for(record, epoch=epoch, assignee=worker)
    if send:
        deliver(store, envelope)
    return envelope


def deliver(store: Store, envelope: TaskEnvelope) -> None:
    Mailbox(store, TEAM, "leader").assign(envelope)


def follower(
    store: Store, tmp_path: Path, executor: Any, member: str = "w1", **config: Any
) -> Follower:
    settings: dict[str, Any] = {
        "state_dir": tmp_path / "state",
        "checkin_interval": 60.0,
        "visibility_timeout": 5.0,
        **config,
    }
    return Follower(store, FollowerConfig(team=TEAM, member_id=member, **settings), executor)


def drain_all(f: Follower) -> int:
    handled = 0
    while f.poll_once():
        handled += 1
    return handled


def to_leader(store: Store) -> list[Any]:
    """Every message waiting in the leader's queue, parsed and acked."""
    deliveries = store.receive(
        TEAM, LEADER_QUEUE, consumer="test", visibility_timeout=30.0, max_messages=100
    )
    for d in deliveries:
        store.ack(TEAM, LEADER_QUEUE, d.message_id)
    return [parse_message(d.payload) for d in deliveries]


def results(store: Store) -> list[TaskResult]:
    return [m.body for m in to_leader(store) if m.type == "task.result"]


def events(store: Store, kind: str) -> list[Event]:
    return [e for e in store.events(TEAM) if e.kind == kind]


def queue_empty(store: Store, member: str = "w1") -> bool:
    return not store.receive(TEAM, member_queue(member), consumer="peek", visibility_timeout=0.1)


# --- epochs ---------------------------------------------------------------------------


def test_stale_envelope_is_ignored_logged_and_remembered_by_a_new_follower(
    store: Store, tmp_path: Path
) -> None:
    old_epoch = lead(store, "old-leader")
    stale = assign(store, "old-task", epoch=old_epoch, send=False)
    new_epoch = lead(store, "new-leader")
    assign(store, "new-task", epoch=new_epoch)
    first = Recording()
    f1 = follower(store, tmp_path, first)
    assert drain_all(f1) == 1
    assert [c.task_id for c in first.calls] == ["new-task"]
    assert f1.memory.highest == new_epoch

    deliver(store, stale)  # a deposed leader's envelope arrives late
    assert drain_all(f1) == 1
    assert [c.task_id for c in first.calls] == ["new-task"]
    ignored = events(store, "follower.stale_envelope_ignored")
    assert [(e.data["task_id"], e.data["epoch"], e.data["highest"]) for e in ignored] == [
        ("old-task", old_epoch, new_epoch)
    ]
    assert store.get_task(TEAM, "old-task").state == "queued"
    assert queue_empty(store), "an ignored envelope must be acked, not redelivered"

    second = Recording()
    f2 = follower(store, tmp_path, second)  # a restart: new object, same state_dir
    assert f2.memory.highest == new_epoch
    deliver(store, stale)
    assert drain_all(f2) == 1
    assert second.calls == []
    assert len(events(store, "follower.stale_envelope_ignored")) == 2
    assert store.get_task(TEAM, "old-task").state == "queued"


def test_stale_epoch_is_refused_by_the_store_too(store: Store, tmp_path: Path) -> None:
    old_epoch = lead(store, "old-leader")
    assign(store, "t", epoch=old_epoch)
    new_epoch = lead(store, "new-leader")  # the follower has never heard of this epoch
    executor = Recording()
    f = follower(store, tmp_path, executor)
    assert drain_all(f) == 1
    assert executor.calls == []
    fenced = events(store, "follower.fenced")
    assert len(fenced) == 1
    assert fenced[0].data["current"] == new_epoch
    assert store.get_task(TEAM, "t").state == "queued"
    assert results(store) == []


def test_task_is_marked_running_under_the_envelope_epoch_before_executing(
    store: Store, tmp_path: Path
) -> None:
    epoch = lead(store)
    seen: list[tuple[str, int, str | None]] = []

    def look(env: TaskEnvelope, ctx: TaskContext) -> dict[str, bool]:
        record = store.get_task(TEAM, env.task_id)
        seen.append((record.state, record.epoch, record.assignee))
        return {"ok": True}

    assign(store, "t", epoch=epoch)
    drain_all(follower(store, tmp_path, Recording(look)))
    assert seen == [("running", epoch, "w1")]
    transitions = [
        e.data
        for e in store.events(TEAM)
        if e.kind == "task.transition" and e.data["to"] == "running"
    ]
    assert len(transitions) == 1


def test_an_outdated_attempt_is_not_executed(store: Store, tmp_path: Path) -> None:
    epoch = lead(store)
    first = assign(store, "t", epoch=epoch, send=False)
    assign(store, "t", "w2", epoch=epoch, send=False)  # the leader moved on to attempt 2
    deliver(store, first)
    executor = Recording()
    drain_all(follower(store, tmp_path, executor))
    assert executor.calls == []
    assert len(events(store, "follower.assignment_outdated")) == 1


# --- idempotency ----------------------------------------------------------------------


def test_redelivered_key_resends_the_recorded_result_without_executing_again(
    store: Store, tmp_path: Path
) -> None:
    epoch = lead(store)
    runs = {"n": 0}

    def once(env: TaskEnvelope, ctx: TaskContext) -> dict[str, int]:
        runs["n"] += 1
        return {"run": runs["n"]}

    envelope = assign(store, "t", epoch=epoch)
    deliver(store, envelope)  # the same envelope twice: a redelivery
    f1 = follower(store, tmp_path, Recording(once))
    assert drain_all(f1) == 2
    assert runs["n"] == 1
    assert f1.executed == 1
    sent = results(store)
    assert [(r.idempotency_key, r.artifact) for r in sent] == [("t:attempt-1", {"run": 1})] * 2
    assert len(events(store, "follower.duplicate_absorbed")) == 1

    deliver(store, envelope)  # and again after the follower restarted
    f2 = follower(store, tmp_path, Recording(once))
    assert drain_all(f2) == 1
    assert runs["n"] == 1
    assert [r.artifact for r in results(store)] == [{"run": 1}]


# --- results --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("produce", "status"),
    [
        ({"status": "completed", "artifact": {"total": 12}}, "completed"),
        ({"status": "blocked", "question": "EUR or USD?"}, "blocked"),
        ({"status": "refused", "notes": {"uncertain": ["outside my scope"]}}, "refused"),
        ({"status": "failed", "notes": {"uncertain": ["vendor site down"]}}, "failed"),
    ],
)
def test_follower_reports_each_status(
    store: Store, tmp_path: Path, produce: dict[str, Any], status: str
) -> None:
    epoch = lead(store)
    assign(store, "t", epoch=epoch)
    drain_all(follower(store, tmp_path, Recording(lambda env, ctx: produce)))
    (result,) = results(store)
    assert result.status == status
    assert result.task_id == "t"
    assert result.idempotency_key == "t:attempt-1"
    assert result.epoch == epoch
    if status == "blocked":
        assert result.question == "EUR or USD?"
    if status == "completed":
        assert result.artifact == {"total": 12}


def test_an_executor_that_raises_becomes_a_failed_result(store: Store, tmp_path: Path) -> None:
    epoch = lead(store)

    def explode(env: TaskEnvelope, ctx: TaskContext) -> None:
        raise RuntimeError("the model returned an empty completion")

    assign(store, "t", epoch=epoch)
    f = follower(store, tmp_path, Recording(explode))
    drain_all(f)  # must not raise
    (result,) = results(store)
    assert result.status == "failed"
    assert "RuntimeError: the model returned an empty completion" in result.notes.uncertain
    recorded = store.effect_lookup(TEAM, "t:attempt-1")
    assert recorded is not None and recorded.result["status"] == "failed"


def test_the_envelope_executor_spec_is_honoured_and_a_bad_one_fails(
    store: Store, tmp_path: Path
) -> None:
    epoch = lead(store)
    assign(store, "noop-task", epoch=epoch, executor="noop")
    assign(store, "bad-task", "w1", epoch=epoch, executor="teleport:now")
    default = Recording()
    allowed = ("noop", "teleport:now")  # the worker's own allowlist decides
    drain_all(follower(store, tmp_path, default, allowed_executors=allowed))
    assert default.calls == []
    by_task = {r.task_id: r for r in results(store)}
    assert by_task["noop-task"].status == "completed"
    assert by_task["bad-task"].status == "failed"
    assert "unknown executor" in " ".join(by_task["bad-task"].notes.uncertain)


def test_an_envelope_cannot_choose_an_executor_the_worker_does_not_allow(
    store: Store, tmp_path: Path
) -> None:
    epoch = lead(store)
    marker = tmp_path / "PWNED"
    assign(store, "t", epoch=epoch, executor=f"command:touch {marker}")
    default = Recording()
    drain_all(follower(store, tmp_path, default))
    [result] = results(store)
    assert result.status == "failed" and "is not allowed on this member" in result.notes.uncertain[0]
    assert not marker.exists() and default.calls == []  # neither it nor anything else ran
    [refused] = [e for e in store.events(TEAM) if e.kind == "security.executor_refused"]
    assert refused.data["task_id"] == "t" and "touch" in refused.data["executor"]


# --- progress -------------------------------------------------------------------------


def test_progress_from_the_executor_restates_the_acceptance_criteria(
    store: Store, tmp_path: Path
) -> None:
    epoch = lead(store)

    def chatty(env: TaskEnvelope, ctx: TaskContext) -> dict[str, bool]:
        ctx.progress("parsed the vendor list", 0.25)
        return {"ok": True}

    assign(store, "t", epoch=epoch)
    drain_all(follower(store, tmp_path, Recording(chatty)))
    messages = to_leader(store)
    assert [m.type for m in messages] == ["task.progress", "task.result"]
    progress = messages[0]
    assert progress.epoch == epoch
    assert progress.body.message == "parsed the vendor list"
    assert progress.body.fraction_done == 0.25
    assert progress.body.idempotency_key == "t:attempt-1"
    assert progress.body.acceptance_criteria == CRITERIA


def test_periodic_checkins_restate_the_acceptance_criteria(store: Store, tmp_path: Path) -> None:
    epoch = lead(store)
    assign(store, "slow", epoch=epoch)
    f = follower(store, tmp_path, SleepExecutor(0.4), checkin_interval=0.05)
    drain_all(f)
    time.sleep(0.1)  # a check-in racing the end of the task is harmless; let it land
    progress = [m.body for m in to_leader(store) if m.type == "task.progress"]
    checkins = [p for p in progress if p.message == "still working"]
    assert len(checkins) >= 2
    assert any(p.message == "halfway" for p in progress)
    assert all(p.acceptance_criteria == CRITERIA for p in progress)
    assert all(p.task_id == "slow" and p.attempt == 1 for p in progress)


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"hello": "world"},
        {"type": "task.assign", "garbage": True},
        {"type": "task.explode", "body": {}},
        {
            "v": 1,
            "type": "task.assign",
            "team": TEAM,
            "from": "leader",
            "to": "w1",
            "epoch": 1,
            "body": {"task_id": "../../etc", "goal": "x"},
        },
    ],
    ids=["no-type", "assign-garbage", "unknown-type", "bad-envelope"],
)
def test_a_malformed_message_is_logged_and_dead_lettered_never_crashes(
    store: Store, tmp_path: Path, payload: dict[str, Any]
) -> None:
    """Given back at once each time (not after the 30 s visibility timeout), so the store
    dead-letters it after its usual number of deliveries, for the operator to read."""
    epoch = lead(store)
    poison = store.send(TEAM, member_queue("w1"), payload)
    executor = Recording()
    f = follower(store, tmp_path, executor, visibility_timeout=30.0)
    assert drain_all(f) == DEFAULT_MAX_DELIVERIES
    bad = events(store, "follower.bad_message")
    assert [e.data["deliveries"] for e in bad] == list(range(1, DEFAULT_MAX_DELIVERIES + 1))
    assert all(e.data["error"] and e.data["id"] == poison for e in bad)
    assert [d.message_id for d in store.dead_letters(TEAM)] == [poison]
    assert queue_empty(store)
    assign(store, "after", epoch=epoch)  # and the follower still works
    drain_all(f)
    assert [c.task_id for c in executor.calls] == ["after"]
