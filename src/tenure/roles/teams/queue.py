"""``queue`` mode: homogeneous work with no leader, on claim-check semantics.

Tasks sit in one shared queue. A worker takes one, and it stays invisible to
others for the visibility timeout; if the worker dies, the task reappears.
Each attempt runs at most once under its idempotency key (the same attempt
runner as a follower's), results are still verified by the ladder (in the
worker process, apart from the executor), and failures are retried as new
attempts with their history. A result recorded by a worker that died before
reviewing it is reviewed by the next worker that takes the message.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenure.coord import ANYONE, Credentials, SignatureRefused
from tenure.executors import (
    Executor,
    TaskContext,
)
from tenure.protocol import (
    Plan,
    ProtocolError,
    TaskEnvelope,
    TaskResult,
    TenureError,
    parse_message,
)
from tenure.protocol.taskspec import AttemptData, spec_for
from tenure.roles.features import BudgetHook
from tenure.roles.leader import Hooks, Judging, Reviewer
from tenure.roles.member import WORK_QUEUE, AttemptRunner, Mailbox, envelope_for
from tenure.roles.member.attempt import choose_executor
from tenure.roles.member.wire import ENVELOPE
from tenure.roles.register import Register, Task
from tenure.store import Delivery, Member, Store
from tenure.verify import Trust

QUEUE_EPOCH = 1


def enqueue_plan(
    store: Store, plan: Plan, *, sender: str = "operator", credentials: Credentials | None = None
) -> int:
    """Register and enqueue every task of a plan, and send a new attempt of each known
    task the register holds as queued (an answered one); dependencies are refused here.
    With the leading role's ``credentials`` the tasks and their envelopes are signed."""
    for index, task in enumerate(plan.tasks):
        if task.depends_on:
            raise ProtocolError(
                f"tasks[{index}].depends_on",
                "no dependencies in queue mode; use team or local mode",
            )
    register = Register(store, plan.team, lambda: QUEUE_EPOCH, credentials)
    mailbox = Mailbox(store, plan.team, sender, credentials=credentials)
    queued = 0
    known = {t.task_id: t for t in register.tasks()}
    for task in plan.tasks:
        if task.id in known:
            if known[task.id].state == "queued":  # e.g. re-queued by `tenure answer`
                enqueue_attempt(register, mailbox, known[task.id])
                queued += 1
            continue
        enqueue_attempt(register, mailbox, register.create(task.id, spec_for(plan, task)))
        queued += 1
    return queued


def enqueue_attempt(register: Register, mailbox: Mailbox, task: Task) -> None:
    """A new attempt of a queued task, into the shared queue."""
    task = register.move(task, "queued", attempt=task.attempt + 1, assignee=None)
    mailbox.assign(envelope_for(task, epoch=QUEUE_EPOCH, assignee=WORK_QUEUE))


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
    trust: Trust | None = None
    credentials: Credentials | None = None  # this member's; None: unsigned
    allowed_executors: tuple[str, ...] = ()  # what an envelope may ask for instead

    def __post_init__(self) -> None:
        # a retry is re-enqueued by the worker that judged it: signed by that member
        self.mailbox = Mailbox(
            self.store, self.team, self.member_id, credentials=self.credentials
        )
        self.runner = AttemptRunner(self.store, self.team, self.member_id, take=True)
        self.review = _QueueReview(self)

    @property
    def executed(self) -> int:
        return self.runner.executed

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
            self.event("queue.bad_message", {"id": delivery.message_id, "error": str(exc)})
        except TenureError as exc:
            self.event("queue.error", {"id": delivery.message_id, "error": str(exc)})
            return
        self.store.ack(self.team, WORK_QUEUE, delivery.message_id)

    def _work(self, env: TaskEnvelope) -> bool:
        if self.credentials is not None:
            try:  # the operator's, or a member's re-enqueued retry: never a stranger's
                self.credentials.verify(ENVELOPE, env, env.signature, by=ANYONE)
            except SignatureRefused as exc:
                self.event(
                    "security.envelope_refused",
                    {"task_id": env.task_id, "claimed": exc.claimed, "reason": str(exc)},
                )
                return True
        ctx = TaskContext(
            worker_id=self.member_id, team=self.team, workdir=self.workdir, envelope=env
        )
        ran = self.runner.run(env, self._executor_for(env), ctx)
        if ran.kind == "in_progress":
            return False
        if ran.kind == "fenced":
            self.event("queue.fenced", {"task_id": env.task_id, **ran.facts})
        elif ran.kind == "outdated":
            self.event("queue.duplicate_absorbed", {"task_id": env.task_id, **ran.facts})
        if ran.result is None:
            return True
        self.review.take(TaskResult.model_validate(ran.result))
        return True

    def _executor_for(self, env: TaskEnvelope) -> Executor:
        def refused(spec: str) -> None:
            self._refused_executor(env.task_id, spec)

        return choose_executor(env, self.executor, self.allowed_executors, refused)

    def _refused_executor(self, task_id: str, spec: str) -> None:
        self.event("security.executor_refused", {"task_id": task_id, "executor": spec[:200]})

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"member": self.member_id, **data})


class _QueueReview(Judging):
    """The ladder in the worker: the leader's judgement, with no leader. A retry is
    a new attempt back in the shared queue."""

    def __init__(self, worker: QueueWorker) -> None:
        self.worker = worker
        self.store, self.team, self.me = worker.store, worker.team, worker.member_id
        self.register = Register(worker.store, worker.team, lambda: QUEUE_EPOCH, worker.credentials)
        self.trust = worker.trust or Trust()
        self.workdir = worker.workdir
        self.credentials = None  # the worker judges its own result: nothing to verify
        self.reviewer = Reviewer(self, Hooks([BudgetHook()]))

    def take(self, result: TaskResult) -> None:
        self.reviewer.on_result(result)
        after = self.register.get(result.task_id)
        if after.state == "queued" and not after.assignee:
            enqueue_attempt(self.register, self.worker.mailbox, after)

    # --- the LeaderContext the reviewer and its hooks see --------------------------------

    def epoch(self) -> int:
        return QUEUE_EPOCH

    def now(self) -> float:
        return self.worker.store.now()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.worker.event(kind, data)

    def tasks(self) -> list[Task]:
        return self.register.tasks()

    def workers(self) -> dict[str, Member]:
        return {}  # nobody is dispatched to in queue mode

    def dispatch(self, task: Task, worker: str, data: AttemptData | None = None) -> bool:
        enqueue_attempt(self.register, self.worker.mailbox, task)
        return True

    def send(self, task: Task) -> None:
        self.worker.mailbox.assign(envelope_for(task, epoch=QUEUE_EPOCH, assignee=WORK_QUEUE))
