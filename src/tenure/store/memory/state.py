"""What one in-memory store holds, and the process-wide registry of named stores.

Values a caller could change after handing them over (specs, results, data,
payloads, event data) are kept as JSON text and decoded on every read, as the
other backends do: a caller never shares a dict with the store, and what comes
back is what SQLite or Redis would give back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tenure.protocol.errors import ConfigError
from tenure.store.records import Lease, Member, TaskState

Clock = Callable[[], float]


@dataclass(slots=True)
class TaskRow:
    state: TaskState
    version: int
    epoch: int
    attempt: int
    assignee: str | None
    spec: str
    result: str | None
    reason: str
    data: str
    created_at: float
    updated_at: float


@dataclass(slots=True)
class EffectRow:
    status: Literal["running", "done"]
    holder: str
    claim_expires: float
    epoch: int
    result: str | None = None
    tie: str | None = None  # the holder's incarnation when it claimed, if a live member


@dataclass(slots=True)
class MessageRow:
    seq: int
    message_id: str
    queue: str
    payload: str
    sent_at: float
    visible_at: float
    deliveries: int = 0
    consumer: str = ""
    tie: str | None = None  # the consumer's incarnation when delivered, if a live member


@dataclass(frozen=True, slots=True)
class EventRow:
    seq: int
    team: str
    kind: str
    at: float
    epoch: int | None
    data: str


@dataclass(slots=True)
class TeamState:
    """One team: its epoch counter and lease, members, register, ledger, queues, events."""

    epoch: int = 0
    lease: Lease | None = None
    token_hash: str | None = None  # of the lease holder's token (``store.base.token_hash``)
    members: dict[str, Member] = field(default_factory=dict)
    tasks: dict[str, TaskRow] = field(default_factory=dict)  # in creation order
    effects: dict[str, EffectRow] = field(default_factory=dict)
    queues: dict[str, dict[str, MessageRow]] = field(default_factory=dict)  # in send order
    dead: dict[str, MessageRow] = field(default_factory=dict)
    events: list[EventRow] = field(default_factory=list)
    known: bool = False
    """Listed by ``teams()``: set by its first event, as in the other backends."""


class Memory:
    """The state behind one or more ``MemoryStore`` handles; one lock guards all of it."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or time.time
        self.lock = threading.RLock()
        self.sent = threading.Condition(self.lock)
        """Notified when a message becomes deliverable (sent, given back): a waiting
        ``receive`` wakes on it."""
        self.teams: dict[str, TeamState] = {}
        self.events: list[EventRow] = []  # every team's, in seq order
        self.event_seq = 0
        self.message_seq = 0

    def team(self, name: str) -> TeamState:
        """The team's state, made empty on first use (an empty team is not listed)."""
        found = self.teams.get(name)
        if found is None:
            found = self.teams[name] = TeamState()
        return found


_named: dict[str, Memory] = {}
_named_lock = threading.Lock()


def named(name: str, clock: Clock | None) -> Memory:
    """The process's store called ``name``, made on first use with ``clock``."""
    with _named_lock:
        found = _named.get(name)
        if found is None:
            found = _named[name] = Memory(clock)
        elif clock is not None and clock is not found.clock:
            raise ConfigError(
                f"memory store {name!r} already runs on another clock; open it without clock="
            )
        return found


def forget(name: str) -> bool:
    """Drop the named store's state (handles still open keep theirs); False if unknown."""
    with _named_lock:
        return _named.pop(name, None) is not None
