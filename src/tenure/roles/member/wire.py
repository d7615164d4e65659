"""Queues, sending and envelope building shared by every role."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError

from tenure import observe
from tenure.coord import Credentials
from tenure.executors import fit_result
from tenure.protocol import (
    Message,
    ProtocolError,
    TaskEnvelope,
    TaskResult,
    TenureError,
    idempotency_key,
    parse_message,
    to_dict,
)
from tenure.protocol.clip import clip
from tenure.protocol.codec import translate
from tenure.protocol.limits import check_depth
from tenure.protocol.messages import (
    AssignMessage,
    CancelMessage,
    ProgressMessage,
    ResultMessage,
    TaskProgress,
)
from tenure.protocol.secrets import redact_value
from tenure.roles.register import Task, read_task
from tenure.store import Delivery, Store, TaskRecord

ENVELOPE, RESULT, PROGRESS = "envelope", "result", "progress"  # the kinds of signed body
BodyT = TypeVar("BodyT", TaskEnvelope, TaskResult, TaskProgress)
LEADER_QUEUE = "leader"
WORK_QUEUE = "work"
WORK_CAPABILITY = "work"
RECEIVE_WAIT = 0.1
"""Seconds a member's receive waits for work before it looks again (``Store.receive``'s
``wait``): it wakes the moment a message comes, and a stop waits at most this long."""
QueueMessage = AssignMessage | ResultMessage | ProgressMessage | CancelMessage


def member_queue(member_id: str) -> str:
    return f"member:{member_id}"


def read_delivery(delivery: Delivery) -> Message:
    """The message a delivery holds; ``ProtocolError`` if its payload could not be
    decoded (too large, too deep, not JSON: ``delivery.problem``) or is not a valid
    message."""
    if delivery.problem is not None:
        raise ProtocolError("(stored message)", delivery.problem)
    return parse_message(delivery.payload)


def crash_line(exc: BaseException) -> str:
    """An unexpected error while handling a message, as the one line a member logs."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {clip(text[0], 500) if text else ''}"


def give_back(store: Store, team: str, delivery: Delivery) -> None:
    """Hand an unreadable delivery back unacked, visible again at once: it comes back
    until the store dead-letters it after the same number of deliveries as any
    message that keeps failing (an operator reads it with ``tenure dead-letters``).
    Never raises: if the store is down the visibility timeout does the same, later."""
    try:
        store.release(team, delivery.queue, delivery.message_id)
    except TenureError:
        pass


class Mailbox:
    """Sends protocol messages through the store's message log.

    With ``credentials`` every body it sends is signed: envelopes by the leading
    role, results and check-ins by the member itself. ``duplicate`` sends every
    message twice: a fault the demo and the tests inject to show that redelivery
    is absorbed, never executed twice.
    """

    def __init__(
        self,
        store: Store,
        team: str,
        sender: str,
        *,
        duplicate: bool = False,
        credentials: Credentials | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.sender = sender
        self.duplicate = duplicate
        self.credentials = credentials

    def on(self, store: Store) -> Mailbox:
        """This mailbox sending through ``store`` (a ``StagedStore``, to send with the
        writes of one commit)."""
        return Mailbox(
            store,
            self.team,
            self.sender,
            duplicate=self.duplicate,
            credentials=self.credentials,
        )

    def send(self, queue: str, message: QueueMessage) -> None:
        payload = to_dict(message)
        self.store.send(self.team, queue, payload)
        if self.duplicate:
            self.store.send(self.team, queue, payload)

    def header(self, to: str, epoch: int) -> dict[str, Any]:
        return {"team": self.team, "from": self.sender, "to": to, "epoch": epoch}

    def signed(self, kind: str, body: BodyT) -> BodyT:
        """``body`` with this sender's signature (unchanged without credentials). Known
        secrets are taken out first, as the store would: what is signed is what is kept."""
        if self.credentials is None:
            return body
        clean = type(body).model_validate(redact_value(to_dict(body)))
        return clean.model_copy(update={"signature": self.credentials.sign(kind, clean)})

    def assign(self, envelope: TaskEnvelope) -> None:
        """Send an envelope; ``ProtocolError`` (nothing sent) if it is over the body limit."""
        queue, message = self._assignment(envelope)
        self.send(queue, message)

    def assign_many(self, envelopes: list[TaskEnvelope]) -> None:
        """Send envelopes addressed to one queue in one store call (``send_many``): a
        plan's worth of work costs one round trip, not one per task."""
        built = [self._assignment(envelope) for envelope in envelopes]
        for queue in dict.fromkeys(queue for queue, _ in built):
            payloads = [to_dict(m) for q, m in built if q == queue]
            self.store.send_many(self.team, queue, payloads)
            if self.duplicate:
                self.store.send_many(self.team, queue, payloads)

    def _assignment(self, envelope: TaskEnvelope) -> tuple[str, AssignMessage]:
        envelope = self.signed(ENVELOPE, traced(envelope))
        to = envelope.assigned_to
        message = _message(AssignMessage, self.header(to, envelope.epoch), envelope)
        return member_queue(to) if to != WORK_QUEUE else WORK_QUEUE, message

    def result(self, queue: str, body: dict[str, Any]) -> None:
        """Report a result. One too large to travel (recorded by an older version, say)
        is reported as a failed attempt saying so, not dropped and not a crash."""
        result = fit_result(_parsed_result(body))
        result = self.signed(RESULT, result)
        message = _message(ResultMessage, self.header(queue, result.epoch), result)
        self.send(queue, message)

    def progress(self, queue: str, epoch: int, body: TaskProgress) -> None:
        body = self.signed(PROGRESS, body)
        message = _message(ProgressMessage, self.header(queue, epoch), body)
        self.send(queue, message)


def traced(envelope: TaskEnvelope) -> TaskEnvelope:
    """``envelope`` carrying the span open here (the leader's term, a queue run) as its
    ``traceparent``, so the attempt's spans in the worker's process join the run's
    trace; unchanged while tracing is off, when it carries one already, or when it was
    signed already (its signature covers the field: a signing sender signs after)."""
    if envelope.traceparent is not None or envelope.signature is not None:
        return envelope
    span = observe.traceparent()
    return envelope if span is None else envelope.model_copy(update={"traceparent": span})


MessageT = TypeVar("MessageT", AssignMessage, ResultMessage, ProgressMessage)


def _message(kind: type[MessageT], header: dict[str, Any], body: Any) -> MessageT:
    try:
        return kind.model_validate({**header, "body": body})
    except ValidationError as exc:
        raise translate(exc, source="outgoing message") from None


def _parsed_result(body: dict[str, Any]) -> TaskResult:
    try:
        check_depth(body, "result")
        return TaskResult.model_validate(body)
    except ValidationError as exc:
        raise translate(exc, source="result") from None


def envelope_for(
    task: Task | TaskRecord,
    *,
    epoch: int,
    assignee: str,
    dependencies: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    extra_input: dict[str, Any] | None = None,
) -> TaskEnvelope:
    """The envelope of the task's current attempt, at ``epoch``. The artifacts of the
    tasks it depends on travel in ``input.from_dependencies``, the operator's answers
    in ``input.operator_answers``."""
    if isinstance(task, TaskRecord):
        task = read_task(task)
    if task.problem is not None:
        raise ProtocolError("(register)", task.problem)
    spec, data = task.spec, task.data
    task_input = dict(spec.input)
    if data.qa:
        task_input["operator_answers"] = [to_dict(a) for a in data.qa]
    if dependencies:
        task_input["from_dependencies"] = dependencies
    task_input.update(extra_input or {})
    try:
        return TaskEnvelope.model_validate(
            {
                "task_id": task.task_id,
                "idempotency_key": idempotency_key(task.task_id, task.attempt),
                "epoch": epoch,
                "attempt": task.attempt,
                "assigned_to": assignee,
                "deadline_seconds": spec.deadline_seconds,
                "goal": spec.goal,
                "acceptance_criteria": spec.acceptance_criteria,
                "checks": spec.checks,
                "input": task_input,
                "scope": spec.scope,
                "depends_on": spec.depends_on,
                "reply_to": LEADER_QUEUE,
                "history": data.history,
                "output_schema": spec.output_schema,
                "executor": spec.executor,
                "budget": budget,
            }
        )
    except ValidationError as exc:
        raise translate(exc, source=f"task {task.task_id!r} in the register") from None
