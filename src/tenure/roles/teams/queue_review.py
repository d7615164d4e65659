"""The ladder inside a queue worker: the leader's judgement, with no leader."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from tenure.coord import Credentials
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, parse_message, to_dict
from tenure.protocol.errors import Conflict, NotFound
from tenure.protocol.taskspec import AttemptData
from tenure.roles.leader import Hooks, Judging, Reviewer
from tenure.roles.leader.guard import Guard
from tenure.roles.member import WORK_QUEUE, Mailbox, envelope_for
from tenure.roles.register import Register, Task
from tenure.roles.teams.queue_plan import QUEUE_EPOCH, enqueue_attempt, queue_hooks
from tenure.store import Delivery, Member, Store
from tenure.verify import Trust


class QueueMember(Protocol):
    """What the review needs of the worker it judges for."""

    store: Store
    team: str
    member_id: str
    workdir: Path | None
    trust: Trust | None
    credentials: Credentials | None
    mailbox: Mailbox

    def event(self, kind: str, data: dict[str, Any]) -> None: ...


class QueueReview(Judging):
    """The ladder in the worker: the leader's judgement, with no leader. A retry is
    a new attempt back in the shared queue."""

    def __init__(self, worker: QueueMember) -> None:
        self.worker = worker
        self.store, self.team, self.me = worker.store, worker.team, worker.member_id
        self.register = Register(
            worker.store, worker.team, lambda: QUEUE_EPOCH, worker.credentials, queue=True
        )
        self.trust = worker.trust or Trust()
        self.workdir = worker.workdir
        self.credentials = None  # the worker judges its own result: nothing to verify
        self.hooks = Hooks(queue_hooks())
        self.reviewer = Reviewer(self, self.hooks)
        self.guard = Guard()

    def put_right(self, task: Task) -> None:
        """A task whose record no key of the team sealed: requeued as a new attempt
        (sent into the queue), or, finished, set aside (``roles.leader.guard``)."""
        if task.tamper is None:
            return  # a spec the team's leadership did not sign: nothing of it runs
        if self.guard.put_right(self, task):
            enqueue_attempt(self.register, self.worker.mailbox, self.register.get(task.task_id))

    def take(self, result: TaskResult) -> None:
        self.reviewer.on_result(result)
        self._next_attempt(self.register.get(result.task_id))

    def finish_recorded(self, env: TaskEnvelope, result: TaskResult) -> bool:
        """A result the ledger already holds: judge it if its task still waits for it
        (``running``, or ``review`` left half done by a worker that died judging it),
        then carry on as after any judgement. False while a live worker is still
        judging it: the message is then kept (not acked), to come back should that
        worker die before it finishes."""
        task = self.register.get(env.task_id)
        current = task.attempt == env.attempt
        if current and task.state == "running":
            self.reviewer.on_result(result)
        elif current and task.state == "review" and _result_key(task) == env.idempotency_key:
            if not self._abandoned(task):
                return False
            self.worker.event("queue.review_resumed", {"task_id": task.task_id})
            self.reviewer.review(task)
        self._next_attempt(self.register.get(env.task_id), env)
        return True

    def _abandoned(self, task: Task) -> bool:
        """A review its worker will not finish: that worker is this one, or no live
        member, or the live member holding its id joined after the review began (a
        restarted process, which knows nothing of the review)."""
        if task.assignee == self.me:
            return True
        live = {m.member_id: m for m in self.store.members(self.team)}
        holder = live.get(task.assignee or "")
        return holder is None or holder.joined_at > task.record.updated_at

    def settle_dead(self, letter: Delivery) -> bool:
        """A dead-lettered envelope whose attempt is still the task's, unfinished and held
        by no live worker: finish it from its recorded result, or block it (a person
        decides, ``tenure inbox``). True if it settled the task."""
        try:
            message = parse_message(letter.payload)
            if message.type != "task.assign":
                return False
            env = message.body
            task = self.register.get(env.task_id)
            if task.attempt != env.attempt or task.state not in ("queued", "running"):
                return False
            if task.assignee in {m.member_id for m in self.store.members(self.team)}:
                return False  # its worker is alive and may still finish it
            recorded = self.store.effect_lookup(self.team, env.idempotency_key)
            if recorded is not None:
                self.finish_recorded(env, TaskResult.model_validate(recorded.result))
                return True
            self.reviewer.block(task, _given_up(letter))
        except (ProtocolError, Conflict, NotFound):
            return False
        return True

    def carry_on(self, env: TaskEnvelope) -> None:
        """An envelope that did not run here (an old attempt's): make sure its task is
        not left waiting for a message a dead worker never sent."""
        self._next_attempt(self.register.get(env.task_id), env)

    def _next_attempt(self, task: Task, env: TaskEnvelope | None = None) -> None:
        """A judged task back in ``queued`` gets its next attempt; a newer attempt that
        is queued and nobody's is sent again (the worker that moved it may have died
        before sending it: a second copy is absorbed under its idempotency key)."""
        if task.state != "queued" or task.assignee:
            return
        if env is None or task.attempt == env.attempt:
            enqueue_attempt(self.register, self.worker.mailbox, task)
        elif task.attempt > env.attempt:
            self.send(task)

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


FROM_REGISTER = ("signature", "history", "traceparent")
"""What runs is the register's, whatever a message says (its trace context only parents
the spans of the attempt, and is taken from the message apart)."""


def differing(sent: TaskEnvelope, built: TaskEnvelope) -> list[str]:
    """The fields of an envelope that differ from the one the register defines (its
    failure history and the operator's answers aside: the register's are used)."""
    said, kept = to_dict(sent), to_dict(built)
    for body in (said, kept):
        for name in FROM_REGISTER:
            body.pop(name, None)
        if isinstance(body.get("input"), dict):
            body["input"] = {k: v for k, v in body["input"].items() if k != "operator_answers"}
    return sorted(k for k in said.keys() | kept.keys() if said.get(k) != kept.get(k))


def _given_up(letter: Delivery) -> str:
    return (
        f"its message was given up after {letter.delivery_count} deliveries: each worker "
        "that took it died or never finished it (see tenure dead-letters)"
    )


def _result_key(task: Task) -> str | None:
    key = (task.result or {}).get("idempotency_key")
    return key if isinstance(key, str) else None
