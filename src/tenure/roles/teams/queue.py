"""``queue`` mode: homogeneous work with no leader, on claim-check semantics.

Tasks sit in one shared queue. A worker takes one, and it stays invisible to
others for the visibility timeout; if the worker dies, the task reappears.
Each attempt runs at most once under its idempotency key, results are still
verified by the ladder (in the worker process, apart from the executor), and
failures are retried as new attempts with their history.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenure.executors import Executor, TaskContext, failed, resolve_executor, safe_result
from tenure.protocol import Plan, ProtocolError, TaskEnvelope, TenureError, parse_message, to_dict
from tenure.protocol.errors import Conflict, EffectInProgress, StaleEpoch
from tenure.roles.leader.review import Reviewer
from tenure.roles.member.wire import WORK_QUEUE, Mailbox, envelope_for
from tenure.roles.register.plan import plan_spec
from tenure.store import Delivery, Store, TaskRecord

QUEUE_EPOCH = 1


def enqueue_plan(store: Store, plan: Plan, *, sender: str = "operator") -> int:
    """Register and enqueue every task of a plan, and send a new attempt of each known
    task the register holds as queued (an answered one); dependencies are refused here."""
    for index, task in enumerate(plan.tasks):
        if task.depends_on:
            raise ProtocolError(
                f"tasks[{index}].depends_on",
                "no dependencies in queue mode; use team or local mode",
            )
    mailbox = Mailbox(store, plan.team, sender)
    queued = 0
    known = {t.task_id: t for t in store.tasks(plan.team)}
    for task in plan.tasks:
        if task.id in known:
            if known[task.id].state == "queued":  # e.g. re-queued by `tenure answer`
                _enqueue_attempt(store, mailbox, known[task.id])
                queued += 1
            continue
        record = store.create_task(
            plan.team, task.id, epoch=QUEUE_EPOCH, spec=plan_spec(plan, task)
        )
        _enqueue_attempt(store, mailbox, record)
        queued += 1
    return queued


def _enqueue_attempt(store: Store, mailbox: Mailbox, record: TaskRecord) -> None:
    record = store.transition(
        record.team,
        record.task_id,
        epoch=QUEUE_EPOCH,
        expect=["queued"],
        to="queued",
        version=record.version,
        attempt=record.attempt + 1,
        assignee=None,
    )
    mailbox.assign(envelope_for(record, epoch=QUEUE_EPOCH, assignee=WORK_QUEUE))


@dataclass
class QueueWorker:
    store: Store
    team: str
    member_id: str
    executor: Executor
    visibility_timeout: float = 330.0
    """Keep it above the longest task deadline: a claim lasts for the attempt's
    deadline, so a message that reappears sooner finds a live worker's claim and
    counts a delivery toward dead-lettering for nothing."""
    poll_interval: float = 0.02
    workdir: Path | None = None

    def __post_init__(self) -> None:
        self.mailbox = Mailbox(self.store, self.team, self.member_id)
        self.reviewer = Reviewer(
            self.store, self.team, lambda: QUEUE_EPOCH, workdir=self.workdir, on_event=self._event
        )
        self.executed = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if not self.poll_once():
                stop.wait(self.poll_interval)

    def poll_once(self) -> bool:
        deliveries = self.store.receive(
            self.team,
            WORK_QUEUE,
            consumer=self.member_id,
            visibility_timeout=self.visibility_timeout,
        )
        for delivery in deliveries:
            self.handle(delivery)
        return bool(deliveries)

    def handle(self, delivery: Delivery) -> None:
        try:
            message = parse_message(delivery.payload)
            if message.type != "task.assign":
                raise ProtocolError("type", f"task.assign in the work queue, got {message.type}")
            if not self._work(message.body):
                return  # another worker holds it: let it come back after the timeout
        except ProtocolError as exc:
            self._event("queue.bad_message", {"id": delivery.message_id, "error": str(exc)})
        except TenureError as exc:
            self._event("queue.error", {"id": delivery.message_id, "error": str(exc)})
            return
        self.store.ack(self.team, WORK_QUEUE, delivery.message_id)

    def _work(self, env: TaskEnvelope) -> bool:
        task = self.store.get_task(self.team, env.task_id)
        if task.attempt != env.attempt or task.state not in ("queued", "running"):
            self._event("queue.duplicate_absorbed", {"task_id": env.task_id, "state": task.state})
            return True
        try:
            ticket = self.store.effect_begin(
                self.team,
                env.idempotency_key,
                epoch=env.epoch,
                holder=self.member_id,
                claim_seconds=env.deadline_seconds,
            )
            if ticket.status == "done":
                self._event("queue.duplicate_absorbed", {"task_id": env.task_id, "state": "done"})
                return True
            self.store.transition(
                self.team,
                env.task_id,
                epoch=env.epoch,
                expect=[task.state],
                to="running",
                version=task.version,
                assignee=self.member_id,
            )
        except EffectInProgress:
            return False
        except (Conflict, StaleEpoch) as exc:
            self._event("queue.fenced", {"task_id": env.task_id, "error": str(exc)})
            return True
        result = self._execute(env)
        self.reviewer.on_result(result)
        after = self.store.get_task(self.team, env.task_id)
        if after.state == "queued":
            _enqueue_attempt(self.store, self.mailbox, after)
        return True

    def _execute(self, env: TaskEnvelope) -> Any:
        ctx = TaskContext(
            worker_id=self.member_id, team=self.team, workdir=self.workdir, envelope=env
        )
        try:  # a task may name its own executor, as it may in team mode
            executor = resolve_executor(env.executor) if env.executor else self.executor
        except ProtocolError:
            result = failed(env, f"unknown executor {env.executor!r}")
        else:
            result = safe_result(env, lambda: executor.execute(env, ctx))
        self.executed += 1
        self.store.effect_finish(
            self.team, env.idempotency_key, holder=self.member_id, result=to_dict(result)
        )
        return result

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"member": self.member_id, **data})
