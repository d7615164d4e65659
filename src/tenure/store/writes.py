"""Several writes made in one atomic step, and an attempt begun in one.

An attempt's life is a handful of writes (claim the key, mark the task running,
record the result, judge it, ack the message): made one call each they cost one
round trip each. ``Store.begin_attempt`` and ``Store.commit`` make them in one
call and one atomic step, with the same checks and the same events as the single
calls, so a worker's whole attempt is three round trips (take, begin, commit).

A ``commit`` is all or nothing: every check (each ``Move``'s fence and
compare-and-set, against the state the ``Move``s before it in the same call leave;
each ``Expect``: a task read and not moved is still as it was read; every payload's
limits) runs before the first write, and a refused call raises the
error the single call would have raised, having written nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tenure.protocol.errors import ProtocolError
from tenure.store.records import TaskRecord, TaskState

MOVE_FIELDS = ("assignee", "attempt", "result", "reason", "data", "spec")
"""What a ``Move`` may change besides the state (the ``transition`` keywords)."""


@dataclass(frozen=True, slots=True)
class Move:
    """``transition(task_id, epoch=, expect=, to=, version=, **changes)``."""

    task_id: str
    epoch: int
    expect: tuple[TaskState, ...]
    to: TaskState
    version: int | None = None
    changes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.changes) - set(MOVE_FIELDS))
        if unknown:
            raise ProtocolError("changes", f"some of {', '.join(MOVE_FIELDS)}, got {unknown}")


@dataclass(frozen=True, slots=True)
class Expect:
    """No write: the task must still be at ``version`` (a step decided on what it read)."""

    task_id: str
    version: int


@dataclass(frozen=True, slots=True)
class Note:
    """``append_event(kind, data, epoch=)``."""

    kind: str
    data: dict[str, Any]
    epoch: int | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """``effect_finish(key, holder=, result=)``: the first record of a key wins."""

    key: str
    holder: str
    result: Any


@dataclass(frozen=True, slots=True)
class Ack:
    """``ack(queue, message_id)``."""

    queue: str
    message_id: str


@dataclass(frozen=True, slots=True)
class Send:
    """``send(queue, payload)``."""

    queue: str
    payload: dict[str, Any]


Write = Move | Expect | Note | Record | Ack | Send
Begun = Literal["run", "replayed", "outdated", "fenced", "in_progress"]


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """What ``begin_attempt`` found or did.

    - ``run``: the key is claimed and ``task`` is the task marked running (ours now);
    - ``replayed``: the key is done; ``result`` is what it recorded;
    - ``outdated``: the task is gone (``task`` None) or not this attempt's, or not
      ours (``task`` as found); nothing was written;
    - ``fenced``: the attempt's epoch is stale (``current`` is the team's);
    - ``in_progress``: another live holder (``holder``) has the key.

    ``now`` is the store's clock when it answered.
    """

    outcome: Begun
    now: float
    task: TaskRecord | None = None
    result: Any = None
    current: int | None = None
    holder: str | None = None
