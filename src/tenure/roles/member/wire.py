"""Queues, sending and envelope building shared by every role."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError

from tenure.coord import Credentials
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, idempotency_key, to_dict
from tenure.protocol.codec import translate
from tenure.protocol.messages import (
    AssignMessage,
    CancelMessage,
    ProgressMessage,
    ResultMessage,
    TaskProgress,
)
from tenure.protocol.secrets import redact_value
from tenure.roles.register import Task, read_task
from tenure.store import Store, TaskRecord

ENVELOPE, RESULT, PROGRESS = "envelope", "result", "progress"  # the kinds of signed body
BodyT = TypeVar("BodyT", TaskEnvelope, TaskResult, TaskProgress)
LEADER_QUEUE = "leader"
WORK_QUEUE = "work"
WORK_CAPABILITY = "work"
QueueMessage = AssignMessage | ResultMessage | ProgressMessage | CancelMessage


def member_queue(member_id: str) -> str:
    return f"member:{member_id}"


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
        envelope = self.signed(ENVELOPE, envelope)
        to = envelope.assigned_to
        message = AssignMessage.model_validate(
            {**self.header(to, envelope.epoch), "body": envelope}
        )
        self.send(member_queue(to) if to != WORK_QUEUE else WORK_QUEUE, message)

    def result(self, queue: str, body: dict[str, Any]) -> None:
        result = self.signed(RESULT, TaskResult.model_validate(body))
        message = ResultMessage.model_validate({**self.header(queue, result.epoch), "body": result})
        self.send(queue, message)

    def progress(self, queue: str, epoch: int, body: TaskProgress) -> None:
        body = self.signed(PROGRESS, body)
        message = ProgressMessage.model_validate({**self.header(queue, epoch), "body": body})
        self.send(queue, message)


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
