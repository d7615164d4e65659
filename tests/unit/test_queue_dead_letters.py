"""Queue mode: a work message given up on (every worker that took it died) leaves no
task ``running`` forever: a worker finishes it from its record, or a person decides."""

from __future__ import annotations

import time

from tenure.executors import resolve_executor
from tenure.protocol import Plan, idempotency_key
from tenure.roles import QueueWorker, enqueue_plan
from tenure.roles.member import WORK_QUEUE
from tenure.store import DEFAULT_MAX_DELIVERIES, Store

TEAM = "unit-queue-dead"


def _taken_by_the_dead(store: Store) -> str:
    """One task, whose message each of a run of workers took and died holding."""
    enqueue_plan(store, Plan.model_validate({"team": TEAM, "tasks": [{"id": "t", "goal": "g"}]}))
    task = store.get_task(TEAM, "t")
    store.transition(
        TEAM, "t", epoch=1, expect=["queued"], to="running", version=task.version, assignee="ghost"
    )
    for _ in range(DEFAULT_MAX_DELIVERIES):
        assert store.receive(TEAM, WORK_QUEUE, consumer="ghost", visibility_timeout=0.05)
        time.sleep(0.06)  # the consumer was no member: its hold ends with the timeout
    return idempotency_key("t", 1)


def _worker(store: Store) -> QueueWorker:
    return QueueWorker(store, TEAM, "w1", resolve_executor("noop"), visibility_timeout=30.0)


def test_a_task_whose_message_was_given_up_goes_to_a_person(store: Store) -> None:
    _taken_by_the_dead(store)
    worker = _worker(store)
    assert worker.poll_once() is False  # the message is dead-lettered now, not delivered
    assert worker.settle_dead_letters() == 1
    task = store.get_task(TEAM, "t")
    assert task.state == "blocked"
    assert f"given up after {DEFAULT_MAX_DELIVERIES} deliveries" in task.reason
    assert worker.settle_dead_letters(now=time.monotonic() + 60) == 0  # settled once


def test_a_given_up_task_whose_result_is_recorded_is_finished(store: Store) -> None:
    key = _taken_by_the_dead(store)
    result = {"task_id": "t", "idempotency_key": key, "epoch": 1, "status": "completed"}
    store.effect_finish(TEAM, key, holder="ghost", result={**result, "artifact": {"ok": 1}})
    worker = _worker(store)
    worker.poll_once()
    assert worker.settle_dead_letters() == 1
    task = store.get_task(TEAM, "t")
    assert task.state == "done" and task.result is not None
    assert task.result["artifact"] == {"ok": 1}


def test_a_given_up_message_of_a_live_workers_task_is_left_alone(store: Store) -> None:
    _taken_by_the_dead(store)
    store.join(TEAM, "ghost", ttl=30.0, incarnation="alive")
    worker = _worker(store)
    worker.poll_once()
    assert worker.settle_dead_letters() == 0
    assert store.get_task(TEAM, "t").state == "running"
