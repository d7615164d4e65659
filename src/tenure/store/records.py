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
    """Who leads a team, at which epoch, until when (store clock, seconds).

    ``proof`` is what the holder attached after claiming (``prove_lease``): the
    store keeps it and never reads it; members check it (``coord.lease_proof``).
    ``claimed_at`` (store clock) tells a fresh lease, not yet proved, from one
    whose holder never proves it."""

    team: str
    holder: str
    epoch: int
    expires_at: float
    ttl: float
    claimed_at: float = 0.0
    proof: str | None = None


@dataclass(frozen=True, slots=True)
class Member:
    """A live member. ``incarnation`` tells one process holding the id from another
    (empty for a member that joined without one); ``beat_at`` is its last join or
    heartbeat (store clock). ``slots`` is how many attempts it runs at once (1 unless
    it said more), ``free_slots`` how many of them it said were free at that beat."""

    team: str
    member_id: str
    priority: int
    capabilities: tuple[str, ...]
    highest_epoch: int
    joined_at: float
    expires_at: float
    incarnation: str = ""
    beat_at: float = 0.0
    slots: int = 1
    free_slots: int = 1


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
    problem: str | None = None
    """Why the stored payload could not be decoded (``payload`` is then ``{}``): the
    delivery was counted all the same, so it is dead-lettered in the end."""


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the append-only event log (``seq`` grows store-wide)."""

    seq: int
    team: str
    kind: str
    at: float
    epoch: int | None
    data: dict[str, Any] = field(default_factory=dict)
