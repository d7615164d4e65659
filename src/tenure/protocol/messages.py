"""Messages: one common header, a body per type, one discriminated union over ``type``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from tenure.protocol.envelope import (
    MAX_EPOCH,
    Signature,
    Strict,
    TaskEnvelope,
    TaskResult,
    check_key,
)
from tenure.protocol.errors import ProtocolError
from tenure.protocol.ids import check_task_id, check_team, check_ulid, new_id
from tenure.protocol.limits import MAX_BODY_BYTES, MAX_SLOTS, json_size, over
from tenure.protocol.plan import PlanTask

PROTOCOL_VERSION = 1


# --- bodies ---------------------------------------------------------------------------


class LeadershipClaim(Strict):
    holder: str = Field(min_length=1)
    ttl_seconds: float = Field(gt=0)
    priority: int = 0


class LeadershipHeartbeat(Strict):
    holder: str = Field(min_length=1)
    ttl_seconds: float = Field(gt=0)


class LeadershipRelease(Strict):
    holder: str = Field(min_length=1)
    reason: str = ""


class MemberJoin(Strict):
    member: str = Field(min_length=1)
    priority: int = 0
    capabilities: list[str] = Field(default_factory=list)
    highest_epoch: int = Field(default=0, ge=0, le=MAX_EPOCH)
    slots: int = Field(default=1, ge=1, le=MAX_SLOTS)


class MemberHeartbeat(Strict):
    member: str = Field(min_length=1)
    highest_epoch: int = Field(default=0, ge=0, le=MAX_EPOCH)
    running: list[str] = Field(default_factory=list)
    free_slots: int | None = Field(default=None, ge=0, le=MAX_SLOTS)


class MemberLeave(Strict):
    member: str = Field(min_length=1)
    reason: str = ""


class TaskProgress(Strict):
    """A check-in during a long task; restates the criteria so they do not drift."""

    task_id: str
    idempotency_key: str
    attempt: int = Field(ge=1)
    message: str = ""
    acceptance_criteria: list[str] = Field(default_factory=list)
    fraction_done: float | None = Field(default=None, ge=0, le=1)
    signature: Signature | None = None  # the member's, like its result's

    @field_validator("task_id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return check_task_id(value)

    @model_validator(mode="after")
    def _key_matches_attempt(self) -> TaskProgress:
        check_key(self.task_id, self.idempotency_key, self.attempt)
        return self


class TaskCancel(Strict):
    task_id: str
    reason: str = Field(min_length=1)


class EscalationAsk(Strict):
    task_id: str
    question: str = Field(min_length=1)
    options: list[str] = Field(default_factory=list)


class EscalationAnswer(Strict):
    task_id: str
    answer: str = Field(min_length=1)
    answered_by: str = "operator"


class PlanUpdate(Strict):
    revision: int = Field(ge=1)
    reason: str = ""
    tasks: list[PlanTask] = Field(default_factory=list)


def body_size(body: Any) -> int:
    """Bytes of ``body`` as compact UTF-8 JSON, as it travels on the wire."""
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json", by_alias=True)
    try:
        return json_size(body)
    except ProtocolError as exc:
        raise ProtocolError("body", exc.expected) from None


# --- header ---------------------------------------------------------------------------


class _Message(Strict):
    v: Literal[1] = 1
    id: str = Field(default_factory=new_id)
    team: str
    sender: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    epoch: int | None = Field(default=None, ge=0, le=MAX_EPOCH)
    ts: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @model_validator(mode="before")
    @classmethod
    def _body_size(cls, data: Any) -> Any:
        if isinstance(data, dict) and "body" in data:
            size = body_size(data["body"])
            if size > MAX_BODY_BYTES:
                raise ProtocolError("body", f"{over(size, MAX_BODY_BYTES)} (as compact JSON)")
        return data

    @field_validator("id")
    @classmethod
    def _ulid(cls, value: str) -> str:
        return check_ulid(value)

    @field_validator("team")
    @classmethod
    def _team(cls, value: str) -> str:
        return check_team(value)


class _Fenced(_Message):
    """A state-changing message: it must carry the sender's epoch."""

    epoch: int = Field(ge=0, le=MAX_EPOCH)


class _TaskMessage(_Fenced):
    @model_validator(mode="after")
    def _ids_agree(self) -> _TaskMessage:
        body = getattr(self, "body", None)
        body_epoch = getattr(body, "epoch", None)
        if body_epoch is not None and body_epoch != self.epoch:
            raise ProtocolError("body.epoch", f"the header epoch ({self.epoch}); got {body_epoch}")
        task_id = getattr(body, "task_id", None)
        if task_id is not None:
            check_task_id(task_id, "body.task_id")
        return self


class ClaimMessage(_Fenced):
    type: Literal["leadership.claim"] = "leadership.claim"
    body: LeadershipClaim


class LeaderHeartbeatMessage(_Fenced):
    type: Literal["leadership.heartbeat"] = "leadership.heartbeat"
    body: LeadershipHeartbeat


class ReleaseMessage(_Fenced):
    type: Literal["leadership.release"] = "leadership.release"
    body: LeadershipRelease


class JoinMessage(_Message):
    type: Literal["member.join"] = "member.join"
    body: MemberJoin


class MemberHeartbeatMessage(_Message):
    type: Literal["member.heartbeat"] = "member.heartbeat"
    body: MemberHeartbeat


class LeaveMessage(_Message):
    type: Literal["member.leave"] = "member.leave"
    body: MemberLeave


class AssignMessage(_TaskMessage):
    type: Literal["task.assign"] = "task.assign"
    body: TaskEnvelope


class ProgressMessage(_TaskMessage):
    type: Literal["task.progress"] = "task.progress"
    body: TaskProgress


class ResultMessage(_TaskMessage):
    type: Literal["task.result"] = "task.result"
    body: TaskResult


class CancelMessage(_TaskMessage):
    type: Literal["task.cancel"] = "task.cancel"
    body: TaskCancel


class AskMessage(_TaskMessage):
    type: Literal["escalation.ask"] = "escalation.ask"
    body: EscalationAsk


class AnswerMessage(_TaskMessage):
    type: Literal["escalation.answer"] = "escalation.answer"
    body: EscalationAnswer


class PlanUpdateMessage(_Fenced):
    type: Literal["plan.update"] = "plan.update"
    body: PlanUpdate


Message = Annotated[
    ClaimMessage
    | LeaderHeartbeatMessage
    | ReleaseMessage
    | JoinMessage
    | MemberHeartbeatMessage
    | LeaveMessage
    | AssignMessage
    | ProgressMessage
    | ResultMessage
    | CancelMessage
    | AskMessage
    | AnswerMessage
    | PlanUpdateMessage,
    Field(discriminator="type"),
]

MESSAGE_CLASSES: dict[str, type[_Message]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        ClaimMessage,
        LeaderHeartbeatMessage,
        ReleaseMessage,
        JoinMessage,
        MemberHeartbeatMessage,
        LeaveMessage,
        AssignMessage,
        ProgressMessage,
        ResultMessage,
        CancelMessage,
        AskMessage,
        AnswerMessage,
        PlanUpdateMessage,
    )
}
MESSAGE_TYPES: tuple[str, ...] = tuple(MESSAGE_CLASSES)
FENCED_TYPES: frozenset[str] = frozenset(
    name for name, cls in MESSAGE_CLASSES.items() if issubclass(cls, _Fenced)
)
