"""Queue mode's enqueue: a plan's envelopes go out in batches (``send_many``), each
task at its next attempt, in plan order; a waiting worker wakes on them, and still
stops promptly."""

from __future__ import annotations

import threading
import time

from tenure.executors import resolve_executor
from tenure.protocol import Plan
from tenure.roles import QueueWorker, enqueue_plan
from tenure.roles.member import WORK_QUEUE
from tenure.roles.teams.queue_plan import SEND_BATCH
from tenure.store import Store

TEAM = "unit-queue-enqueue"


def _plan(count: int) -> Plan:
    tasks = [{"id": f"t{i:03d}", "goal": "g"} for i in range(count)]
    return Plan.model_validate({"team": TEAM, "tasks": tasks})


def _assigned(store: Store) -> list[tuple[str, int]]:
    found = store.receive(
        TEAM, WORK_QUEUE, consumer="reader", visibility_timeout=30.0, max_messages=1000
    )
    return [(d.payload["body"]["task_id"], d.payload["body"]["attempt"]) for d in found]


def test_a_plan_larger_than_a_batch_is_sent_whole_and_in_order(store: Store) -> None:
    count = SEND_BATCH + 7
    assert enqueue_plan(store, _plan(count)) == count
    assert _assigned(store) == [(f"t{i:03d}", 1) for i in range(count)]
    assert {(t.state, t.attempt) for t in store.tasks(TEAM)} == {("queued", 1)}
    sent = [e for e in store.events(TEAM, limit=10_000) if e.kind == "message.sent"]
    assert len(sent) == count


def test_enqueuing_again_sends_each_queued_task_its_next_attempt(store: Store) -> None:
    enqueue_plan(store, _plan(3))
    _assigned(store)
    assert enqueue_plan(store, _plan(3)) == 3
    assert _assigned(store) == [(f"t{i:03d}", 2) for i in range(3)]


def test_a_waiting_worker_starts_an_enqueued_task_at_once(store: Store) -> None:
    worker = QueueWorker(store, TEAM, "w1", resolve_executor("noop"), visibility_timeout=30.0)
    ran: list[bool] = []
    poller = threading.Thread(target=lambda: ran.append(worker.poll_once(wait=10.0)))
    poller.start()
    time.sleep(0.2)
    started = time.monotonic()
    enqueue_plan(store, _plan(1))
    poller.join(timeout=10.0)
    assert ran == [True]
    assert time.monotonic() - started < 3.0  # woken, not the 10 s wait
    assert store.get_task(TEAM, "t000").state == "done"


def test_an_idle_worker_that_waits_for_work_still_stops_promptly(store: Store) -> None:
    worker = QueueWorker(store, TEAM, "w1", resolve_executor("noop"), visibility_timeout=30.0)
    stop = threading.Event()
    runner = threading.Thread(target=worker.run, args=(stop,))
    runner.start()
    time.sleep(0.4)  # joined, and waiting inside receive
    stopped = time.monotonic()
    stop.set()
    runner.join(timeout=5.0)
    assert not runner.is_alive()
    assert time.monotonic() - stopped < 1.0  # one short wait, not a long block
