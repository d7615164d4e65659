"""Queue mode: a result whose worker died while judging it is judged by the next
worker that takes its message, even when the dead worker's id is live again (a
restarted process), and a review a live worker is still doing is left to it without
losing the message."""

from __future__ import annotations

import time

from tenure.executors import resolve_executor
from tenure.protocol import Plan, idempotency_key
from tenure.roles import QueueWorker, enqueue_plan
from tenure.roles.member import WORK_QUEUE
from tenure.store import Store

TEAM = "unit-queue-resume"


def _left_in_review(store: Store) -> None:
    """One task whose worker ``w2`` recorded its result, moved it to ``review`` and
    stopped holding its message (it died, or its visibility timeout passed)."""
    enqueue_plan(store, Plan.model_validate({"team": TEAM, "tasks": [{"id": "t", "goal": "g"}]}))
    store.join(TEAM, "w2", ttl=30.0, incarnation="first")
    [held] = store.receive(TEAM, WORK_QUEUE, consumer="w2", visibility_timeout=30.0)
    task = store.get_task(TEAM, "t")
    running = store.transition(
        TEAM, "t", epoch=1, expect=["queued"], to="running", version=task.version, assignee="w2"
    )
    key = idempotency_key("t", 1)
    result = {"task_id": "t", "idempotency_key": key, "epoch": 1, "status": "completed"}
    store.effect_begin(TEAM, key, epoch=1, holder="w2", claim_seconds=30.0)
    store.effect_finish(TEAM, key, holder="w2", result=result)
    store.transition(
        TEAM, "t", epoch=1, expect=["running"], to="review", version=running.version, result=result
    )
    assert store.release(TEAM, WORK_QUEUE, held.message_id)


def _worker(store: Store) -> QueueWorker:
    return QueueWorker(store, TEAM, "w1", resolve_executor("noop"), visibility_timeout=0.2)


def test_a_review_left_by_a_worker_that_is_gone_is_resumed(store: Store) -> None:
    _left_in_review(store)
    store.leave(TEAM, "w2")
    assert _worker(store).poll_once()
    assert store.get_task(TEAM, "t").state == "done"
    assert any(e.kind == "queue.review_resumed" for e in store.events(TEAM))


def test_a_review_left_by_a_worker_restarted_under_its_id_is_resumed(store: Store) -> None:
    _left_in_review(store)
    store.leave(TEAM, "w2")
    time.sleep(0.01)
    store.join(TEAM, "w2", ttl=30.0, incarnation="second")  # a new process, same id
    assert _worker(store).poll_once()
    assert store.get_task(TEAM, "t").state == "done"


def test_a_review_a_live_worker_is_doing_keeps_its_message(store: Store) -> None:
    _left_in_review(store)  # w2, first incarnation, is alive and still judging
    worker = _worker(store)
    assert worker.poll_once()
    assert store.get_task(TEAM, "t").state == "review"
    time.sleep(0.25)  # not acked: it comes back, should w2 die before it finishes
    again = store.receive(TEAM, WORK_QUEUE, consumer="w3", visibility_timeout=30.0)
    assert [d.payload["body"]["task_id"] for d in again] == ["t"]
