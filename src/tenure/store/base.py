"""The store contract: a handful of atomic primitives every backend implements.

Leader and follower logic is written once above this surface. Each method is
atomic in every backend; every change it makes appends an event in the same
transaction. Times are seconds on the *store's* clock (``now()``), never a
member's. Backend-native errors are translated to ``tenure`` errors.

Decisions every backend follows (the contract suite pins most of them):

- A refused call changes nothing: checks run before the first write.
- Reads, lease renewals, heartbeats, deliveries and acks append no event (they
  would flood the log); every other change appends one. Event kinds and their
  data: ``lease.claimed`` {holder, ttl}, ``lease.released`` {holder},
  ``member.joined`` {member, priority, capabilities, highest_epoch},
  ``member.left`` {member}, ``task.created`` {task_id, state},
  ``task.transition`` {task_id, from, to, each changed field but data and
  spec, and ``spec: true`` when the spec was replaced},
  ``effect.claimed`` / ``effect.done`` / ``effect.aborted`` {key, holder},
  ``message.sent`` {id, queue, type}, ``message.dead_lettered`` {id, queue,
  deliveries, consumer}; plus whatever callers append.
- A holder claiming a lease it already holds gets ``Conflict`` like anyone:
  a claim always means a new epoch.
- Releasing an expired lease that nobody took over still succeeds.
- ``effect_begin`` by the same holder on its own live claim returns ``run``
  again and extends the claim (a restarted member resumes its own work).
- ``effect_finish`` records the result even without a live claim: the effect
  happened, and forgetting it would let it run again.
- ``join`` and ``heartbeat`` never lower a live member's highest epoch.
- Acking a dead letter returns False.
- A write both stale and conflicting may raise either error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP
from tenure.protocol.errors import Conflict, ProtocolError, StoreError
from tenure.store.records import (
    ALLOWED_TRANSITIONS,
    Delivery,
    EffectTicket,
    Event,
    Lease,
    Member,
    TaskRecord,
    TaskState,
)

DEFAULT_MAX_DELIVERIES = 5


class _Unset:
    """Marker for 'leave this field as it is' in ``transition``."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Store(ABC):
    """One team-state store. ``team`` is a team path; teams never share state."""

    url: str
    distributed: ClassVar[bool] = False
    """True when members on different hosts can share this store."""
    shared_across_processes: ClassVar[bool] = False
    """True when several processes that open this store's URL share its state."""

    # --- clock ---------------------------------------------------------------------

    @abstractmethod
    def now(self) -> float:
        """The store's clock in seconds; lease and visibility times use it."""

    # --- leadership lease -----------------------------------------------------------

    @abstractmethod
    def claim_lease(self, team: str, holder: str, ttl: float, *, at_least: int = 0) -> Lease:
        """Take the vacant (or expired) lease at a new epoch.

        The new epoch is one above the largest of: the team's epoch counter,
        ``at_least``, and the highest epoch any live member has reported. So a
        leader after store loss still comes back above every epoch members hold.
        Raises ``Conflict`` if another holder's lease is live, ``ProtocolError``
        if ``ttl`` is not positive.
        """

    @abstractmethod
    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float) -> Lease:
        """Extend a live lease held by ``holder`` at ``epoch``; else ``LeaseLost``."""

    @abstractmethod
    def release_lease(self, team: str, holder: str, epoch: int) -> bool:
        """Give up the lease; the epoch counter is kept. False if not held."""

    @abstractmethod
    def current_lease(self, team: str) -> Lease | None:
        """The live lease, or None when vacant or expired."""

    @abstractmethod
    def current_epoch(self, team: str) -> int:
        """The team's epoch counter (0 before any claim); it never goes down."""

    # --- membership -----------------------------------------------------------------

    @abstractmethod
    def join(
        self,
        team: str,
        member_id: str,
        *,
        ttl: float,
        priority: int = 0,
        capabilities: Iterable[str] = (),
        highest_epoch: int = 0,
    ) -> Member:
        """Join (or rejoin) with a liveness TTL, reporting the highest epoch seen."""

    @abstractmethod
    def heartbeat(self, team: str, member_id: str, *, ttl: float, highest_epoch: int = 0) -> Member:
        """Extend liveness; ``NotFound`` if the member is unknown or expired (rejoin)."""

    @abstractmethod
    def leave(self, team: str, member_id: str) -> None:
        """Remove a member at once."""

    @abstractmethod
    def members(self, team: str) -> list[Member]:
        """Live members, highest priority first, then by id."""

    # --- task register --------------------------------------------------------------

    @abstractmethod
    def create_task(
        self,
        team: str,
        task_id: str,
        *,
        epoch: int,
        spec: dict[str, Any],
        state: TaskState = "queued",
    ) -> TaskRecord:
        """Register a new task (fenced); ``Conflict`` if the id exists."""

    @abstractmethod
    def transition(
        self,
        team: str,
        task_id: str,
        *,
        epoch: int,
        expect: Iterable[TaskState],
        to: TaskState,
        version: int | None = None,
        assignee: Any = UNSET,
        attempt: Any = UNSET,
        result: Any = UNSET,
        reason: Any = UNSET,
        data: Any = UNSET,
        spec: Any = UNSET,
    ) -> TaskRecord:
        """Compare-and-set one task, fenced.

        Refused with ``StaleEpoch`` when ``epoch`` is below the team's epoch;
        with ``Conflict`` when the state is not in ``expect``, the version
        differs, or ``to`` may not follow the state; ``NotFound`` if absent.
        Fields left ``UNSET`` keep their value. ``spec`` replaces the task's
        spec: a replan re-derives unstarted tasks' definitions.
        """

    @abstractmethod
    def get_task(self, team: str, task_id: str) -> TaskRecord:
        """One task; ``NotFound`` if absent."""

    @abstractmethod
    def tasks(self, team: str) -> list[TaskRecord]:
        """Every task of the team, oldest first."""

    # --- idempotency ledger ---------------------------------------------------------

    @abstractmethod
    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        """Claim a side effect, or learn its recorded result.

        ``done`` if the key finished (with its result); ``run`` if the caller
        now owns it for ``claim_seconds``. ``EffectInProgress`` if another
        holder's claim is live; ``StaleEpoch`` if ``epoch`` is stale.
        """

    @abstractmethod
    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        """Record the result of an owned effect; a key done earlier keeps its first result."""

    @abstractmethod
    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        """Drop an owned claim after the effect failed, so a later try may run it."""

    @abstractmethod
    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        """The recorded result of a done key, else None."""

    # --- message log ----------------------------------------------------------------

    @abstractmethod
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        """Append a message to a queue; returns its id."""

    @abstractmethod
    def receive(
        self,
        team: str,
        queue: str,
        *,
        consumer: str,
        visibility_timeout: float,
        max_messages: int = 1,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> list[Delivery]:
        """Deliver up to ``max_messages``: new ones, or unacked ones whose visibility
        timeout passed. A message already delivered ``max_deliveries`` times is
        moved to the dead letters instead (and an event says so)."""

    @abstractmethod
    def ack(self, team: str, queue: str, message_id: str) -> bool:
        """Acknowledge a delivery; an acked message never comes back. False if unknown."""

    @abstractmethod
    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        """Messages given up on after too many deliveries."""

    @abstractmethod
    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        """Delete the team's dead letters (of one queue, or all); returns how many went.
        An operator reads them first (``tenure dead-letters``); nothing else does."""

    # --- events ---------------------------------------------------------------------

    @abstractmethod
    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        """Append an event of the caller's own (verdicts, faults seen); returns its seq."""

    @abstractmethod
    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        """Events with ``seq > after`` in order (all teams when ``team`` is None)."""

    def last_event_seq(self, team: str) -> int:
        """The seq of the team's newest event, 0 if it has none.

        A reader that follows the log (a leader's register view) starts here instead
        of paging through the whole history; backends answer from an index.
        """
        after = 0
        while True:
            page = self.events(team, after=after, limit=1000)
            if page:
                after = page[-1].seq
            if len(page) < 1000:
                return after

    @abstractmethod
    def trim_events(self, team: str, before_seq: int) -> int:
        """Delete the team's events with ``seq < before_seq``; returns how many went.

        The log is the audit trail and grows with every change: operators trim
        what is old (``tenure trim``). Nothing else reads old events: a leader's
        register view only follows events after its last round, and a new one
        reads the register itself.
        """

    @abstractmethod
    def teams(self) -> list[str]:
        """Every team this store has state for."""

    # --- lifecycle ------------------------------------------------------------------

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default has nothing to release."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_cas(
    current: TaskRecord, expected: frozenset[TaskState], to: TaskState, version: int | None
) -> None:
    """The compare-and-set rule every backend applies before a transition."""
    where = f"task {current.task_id!r}"
    if current.state not in expected:
        raise Conflict(f"{where} is {current.state}, expected {' or '.join(sorted(expected))}")
    if version is not None and current.version != version:
        raise Conflict(f"{where} is at version {current.version}, expected {version}")
    if to not in ALLOWED_TRANSITIONS[current.state]:
        raise Conflict(f"{where}: {current.state} -> {to} is not an allowed transition")


def check_epoch(field: str, value: Any) -> int:
    """An epoch as every backend stores it exactly: a whole number from 0 to ``MAX_EPOCH``
    (2^53 - 1). Anything else is refused before it is written, naming the field."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EPOCH:
        raise ProtocolError(field, f"a whole number from 0 to {MAX_EPOCH}, got {value!r}")
    return value


def next_epoch(team: str, counter: int, at_least: int, reported: Iterable[int]) -> int:
    """The epoch of a new claim: one above the counter, ``at_least`` (the claimer's own
    memory) and what live members report — but a member's report counts only up to
    ``MAX_EPOCH_JUMP`` above the other two, so a member cannot push a team's epochs
    toward the end of the epoch space. ``StoreError`` once that space is used up."""
    base = max(counter, at_least)
    honest = [r for r in reported if r <= base + MAX_EPOCH_JUMP]
    epoch = max([base, *honest]) + 1
    if epoch > MAX_EPOCH:
        raise StoreError(f"team {team!r}: its epochs are used up (the limit is {MAX_EPOCH})")
    return epoch
