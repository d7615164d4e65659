"""Queues, sending and envelope building shared by every role."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tenure.protocol import (
    PriorAttempt,
    TaskEnvelope,
    idempotency_key,
    to_dict,
)
from tenure.protocol.codec import translate
from tenure.protocol.messages import (
    AssignMessage,
    CancelMessage,
    ProgressMessage,
    ResultMessage,
    TaskProgress,
)
from tenure.store import Store, TaskRecord

LEADER_QUEUE = "leader"
WORK_QUEUE = "work"
WORK_CAPABILITY = "work"
QueueMessage = AssignMessage | ResultMessage | ProgressMessage | CancelMessage


def member_queue(member_id: str) -> str:
    return f"member:{member_id}"


class Mailbox:
    """Sends protocol messages through the store's message log.

    ``duplicate`` sends every message twice: a fault the demo and the tests
    inject to show that redelivery is absorbed, never executed twice.
    """

    def __init__(self, store: Store, team: str, sender: str, *, duplicate: bool = False) -> None:
        self.store = store
        self.team = team
        self.sender = sender
        self.duplicate = duplicate

    def send(self, queue: str, message: QueueMessage) -> None:
        payload = to_dict(message)
        self.store.send(self.team, queue, payload)
        if self.duplicate:
            self.store.send(self.team, queue, payload)

    def header(self, to: str, epoch: int) -> dict[str, Any]:
        return {"team": self.team, "from": self.sender, "to": to, "epoch": epoch}

    def assign(self, envelope: TaskEnvelope) -> None:
        to = envelope.assigned_to
        message = AssignMessage.model_validate(
            {**self.header(to, envelope.epoch), "body": envelope}
        )
        self.send(member_queue(to) if to != WORK_QUEUE else WORK_QUEUE, message)

    def result(self, queue: str, body: dict[str, Any]) -> None:
        epoch = int(body["epoch"])
        message = ResultMessage.model_validate({**self.header(queue, epoch), "body": body})
        self.send(queue, message)

    def progress(self, queue: str, epoch: int, body: TaskProgress) -> None:
        message = ProgressMessage.model_validate({**self.header(queue, epoch), "body": body})
        self.send(queue, message)


def envelope_for(
    record: TaskRecord,
    *,
    epoch: int,
    assignee: str,
    dependencies: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
) -> TaskEnvelope:
    """The envelope of the record's current attempt, at ``epoch``; the artifacts of
    the tasks it depends on travel in ``input.from_dependencies``."""
    spec = record.spec
    task_input = _with_answers(spec.get("input", {}), record.data.get("qa", []))
    if dependencies:
        task_input = {**task_input, "from_dependencies": dependencies}
    try:
        history = [PriorAttempt.model_validate(h) for h in record.data.get("history", [])]
        return TaskEnvelope.model_validate(
            {
                "task_id": record.task_id,
                "idempotency_key": idempotency_key(record.task_id, record.attempt),
                "epoch": epoch,
                "attempt": record.attempt,
                "assigned_to": assignee,
                "deadline_seconds": spec.get("deadline_seconds", 300.0),
                "goal": spec.get("goal", ""),
                "acceptance_criteria": spec.get("acceptance_criteria", []),
                "checks": spec.get("checks", []),
                "input": task_input,
                "scope": spec.get("scope", []),
                "depends_on": spec.get("depends_on", []),
                "reply_to": LEADER_QUEUE,
                "history": history,
                "output_schema": spec.get("output_schema"),
                "executor": spec.get("executor"),
                "budget": budget,
            }
        )
    except ValidationError as exc:
        raise translate(exc, source=f"task {record.task_id!r} in the register") from None


def _with_answers(task_input: dict[str, Any], qa: list[dict[str, Any]]) -> dict[str, Any]:
    """Operator answers travel in the input, so a re-queued task sees them."""
    if not qa:
        return task_input
    return {**task_input, "operator_answers": qa}
