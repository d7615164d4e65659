"""Plain records the store returns; backends build them, callers only read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

TaskState = Literal["queued", "running", "review", "done", "blocked", "failed", "cancelled"]
TASK_STATES: tuple[TaskState, ...] = (
    "queued",
    "running",
    "review",
    "done",
    "blocked",
    "failed",
    "cancelled",
)
TERMINAL_STATES: frozenset[TaskState] = frozenset({"done", "cancelled"})

# Which state may follow which. A state may follow itself (an update in place,
# e.g. the leader recording who a queued task is assigned to).
ALLOWED_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    "queued": frozenset({"queued", "running", "blocked", "failed", "cancelled"}),
    "running": frozenset({"running", "review", "queued", "blocked", "failed", "cancelled"}),
    "review": frozenset({"review", "done", "queued", "blocked", "failed", "cancelled"}),
    "blocked": frozenset({"blocked", "queued", "failed", "cancelled"}),
    "failed": frozenset({"failed", "queued", "cancelled"}),
    "done": frozenset(),
    "cancelled": frozenset(),
}


@dataclass(frozen=True, slots=True)
class Lease:
    """Who leads a team, at which epoch, until when (store clock, seconds)."""

    team: str
    holder: str
    epoch: int
    expires_at: float
    ttl: float


@dataclass(frozen=True, slots=True)
class Member:
    team: str
    member_id: str
    priority: int
    capabilities: tuple[str, ...]
    highest_epoch: int
    joined_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task in the register. ``version`` grows on every change (for compare-and-set)."""

    team: str
    task_id: str
    state: TaskState
    version: int
    epoch: int
    attempt: int
    assignee: str | None
    spec: dict[str, Any]
    result: dict[str, Any] | None
    reason: str
    data: dict[str, Any]
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class EffectTicket:
    """Answer of ``effect_begin``: ``run`` means the caller owns the effect now;
    ``done`` means it already ran and ``result`` is what it recorded."""

    key: str
    status: Literal["run", "done"]
    result: Any = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message handed to a consumer; it comes back unless acked in time."""

    message_id: str
    queue: str
    payload: dict[str, Any]
    delivery_count: int
    sent_at: float


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the append-only event log (``seq`` grows store-wide)."""

    seq: int
    team: str
    kind: str
    at: float
    epoch: int | None
    data: dict[str, Any] = field(default_factory=dict)
