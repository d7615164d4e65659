"""The store contract: a handful of atomic primitives every backend implements.

Leader and follower logic is written once above this surface. Each method is
atomic in every backend; every change it makes appends an event in the same
transaction. Times are seconds on the *store's* clock (``now()``), never a
member's. Backend-native errors are translated to ``tenure`` errors.

Decisions every backend follows (the contract suite pins most of them):

- A refused call changes nothing: checks run before the first write.
- Reads, lease renewals, heartbeats, deliveries and acks append no event (they
  would flood the log); every other change appends one. Event kinds and their
  data: ``lease.claimed`` {holder, ttl; and ``over_holder``, ``over_epoch`` when
  it seized a refused lease}, ``lease.proved`` {holder}, ``lease.released`` {holder},
  ``member.joined`` {member, priority, capabilities, highest_epoch, slots},
  ``member.left`` {member}, ``task.created`` {task_id, state},
  ``task.transition`` {task_id, from, to, version (the task's after the
  change), each changed field but data and spec, and ``spec: true`` / ``data: true``
  when the spec / the attempt data was replaced},
  ``effect.claimed`` / ``effect.done`` / ``effect.aborted`` {key, holder},
  ``message.sent`` {id, queue, type}, ``message.dead_lettered`` {id, queue,
  deliveries, consumer}; plus whatever callers append.
- A holder claiming a lease it already holds gets ``Conflict`` like anyone:
  a claim always means a new epoch.
- A new lease (claimed or seized) carries no proof until ``prove_lease``; the
  store never judges a proof, its members do.
- Releasing an expired lease that nobody took over still succeeds (with its token).
- Every lease has a holder token: a random secret its claimer passes to
  ``claim_lease`` or ``seize_lease`` and must present to ``renew_lease``,
  ``prove_lease`` and ``release_lease``. The store keeps only its hash
  (``token_hash``), never the token, and never returns, logs or puts it in an event;
  a wrong or missing token is refused as a wrong holder or epoch is (``LeaseLost``,
  False) and changes nothing. Knowing a lease's holder and epoch, which anyone may
  read, is not enough to use it.
- A claim or seizure never lifts the epoch counter more than ``MAX_EPOCH_JUMP``:
  ``at_least`` beyond that is refused (``ProtocolError`` naming it), nothing written.
- ``effect_begin`` by the same holder on its own live claim returns ``run``
  again and extends the claim (a restarted member resumes its own work).
- ``effect_finish`` records the result even without a live claim: the effect
  happened, and forgetting it would let it run again.
- ``join`` and ``heartbeat`` never lower a live member's highest epoch.
- A member's ``slots`` (how many attempts it runs at once) are set by its join; its
  ``free_slots`` by its join and each heartbeat that says them (one that does not
  keeps the last), never more than its slots.
- A live member id is exclusive: a join or heartbeat under another incarnation
  than the live one is refused (``MemberIdTaken``).
- Holds are tied to the holder's liveness: a message delivered to a consumer,
  or an effect claimed by a holder, that was then a live member comes back (the
  claim lapses) as soon as that member is no longer live under the same
  incarnation, even before the visibility timeout or claim time runs out. A
  consumer or holder that is not a live member keeps the plain timeouts.
- Acking a dead letter returns False.
- A write both stale and conflicting may raise either error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from tenure.protocol.errors import (
    EffectInProgress,
    NotFound,
    StaleEpoch,
)
from tenure.store.payload import check_event_data, payload_text
from tenure.store.records import (
    Delivery,
    EffectTicket,
    Event,
    Lease,
    Member,
    TaskRecord,
    TaskState,
)
from tenure.store.rules import (
    attempt_is_ours,
    check_epoch,
    check_expected,
    check_move,
)
from tenure.store.writes import Ack, AttemptStart, Expect, Move, Note, Record, Send, Write

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

    def clock_is_remote(self) -> bool:
        """True when ``now()`` costs a round trip to a server: a caller that reads the
        time often (the leader) then reads it now and then and carries it forward."""
        return False

    # --- leadership lease -----------------------------------------------------------

    @abstractmethod
    def claim_lease(
        self, team: str, holder: str, ttl: float, *, token: str, at_least: int = 0
    ) -> Lease:
        """Take the vacant (or expired) lease at a new epoch, held with ``token``.

        ``token`` is the claimer's own secret (``new_lease_token()``; ``check_token``
        says what is accepted): the store keeps its hash, and every later renewal,
        proof or release of this lease must present it. The returned ``Lease`` does not
        carry it, nor does any read.

        The new epoch is one above the largest of: the team's epoch counter,
        ``at_least``, and the highest epoch any live member has reported. So a
        leader after store loss still comes back above every epoch members hold.
        Raises ``Conflict`` if another holder's lease is live; ``ProtocolError`` if
        ``ttl`` is not positive, ``token`` is malformed, or ``at_least`` is more than
        ``MAX_EPOCH_JUMP`` above the counter (nothing is written).
        """

    @abstractmethod
    def seize_lease(
        self, team: str, holder: str, ttl: float, *, over: Lease, token: str, at_least: int = 0
    ) -> Lease:
        """Replace a lease the caller refused (its proof is missing or false) at a new epoch.

        A compare-and-set: it succeeds only while the team's lease is still exactly
        ``over`` — the same holder, epoch and proof, live or lapsed — so of two
        candidates seizing the same lease one wins. The refused lease's token is not
        needed (its holder is the one refused); the new lease is held with ``token``.
        The new epoch is chosen, and ``at_least`` bounded, as in ``claim_lease``.
        ``Conflict`` if the lease changed or is vacant.
        """

    @abstractmethod
    def prove_lease(self, team: str, holder: str, epoch: int, proof: str, *, token: str) -> Lease:
        """Attach ``proof`` to the live lease ``holder`` holds at ``epoch`` with ``token``
        (it replaces an earlier one); ``LeaseLost`` otherwise, ``ProtocolError`` for a
        malformed proof."""

    @abstractmethod
    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float, *, token: str) -> Lease:
        """Extend a live lease held by ``holder`` at ``epoch`` with ``token``; else
        ``LeaseLost``."""

    @abstractmethod
    def release_lease(self, team: str, holder: str, epoch: int, *, token: str) -> bool:
        """Give up the lease held by ``holder`` at ``epoch`` with ``token``; the epoch
        counter is kept. False (nothing changed) if it is not held so."""

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
        incarnation: str = "",
        slots: int = 1,
        free_slots: int | None = None,
    ) -> Member:
        """Join (or rejoin) with a liveness TTL, reporting the highest epoch seen.

        ``slots`` is how many attempts the member runs at once, ``free_slots`` how many
        of them are free now (default: all); a leader fills a member up to its slots.

        ``incarnation`` is the caller's own token for its hold on the id (one per
        process run). While the id is live under another incarnation the join is
        refused with ``MemberIdTaken`` and nothing changes; once that member's
        heartbeat lapsed, or it left, the id is free again.
        """

    @abstractmethod
    def heartbeat(
        self,
        team: str,
        member_id: str,
        *,
        ttl: float,
        highest_epoch: int = 0,
        incarnation: str = "",
        free_slots: int | None = None,
    ) -> Member:
        """Extend liveness, saying how many slots are free now (None: as before);
        ``NotFound`` if the member is unknown or expired (rejoin),
        ``MemberIdTaken`` if the id is live under another incarnation (an impostor
        took it over after ours lapsed: stop)."""

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
    def create_tasks(
        self, team: str, tasks: Sequence[tuple[str, dict[str, Any]]], *, epoch: int
    ) -> list[TaskRecord]:
        """Register many queued tasks (``(task_id, spec)``, in order) in one atomic step,
        fenced: every one whose id is free, or — when the call fails or the process dies
        part way — none. Ids already registered are left as they are and not returned.
        So a plan is loaded whole or not at all."""

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

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        """The named tasks that exist, in the order named, in one read (one round trip):
        a reader that follows the log re-reads what changed with it, not one call each."""
        found = []
        for task_id in dict.fromkeys(task_ids):
            try:
                found.append(self.get_task(team, task_id))
            except NotFound:
                continue
        return found

    @abstractmethod
    def clear_tasks(self, team: str, *, epoch: int) -> int:
        """Remove every task of the team (fenced): a fresh start of its plan. The lease,
        the epoch, the ledger, messages and events stay. Returns how many went."""

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
        """Append a message to a queue; returns its id. ``ProtocolError`` (nothing
        written) for a payload over ``MAX_MESSAGE_BYTES`` or nested too deep."""

    @abstractmethod
    def send_many(self, team: str, queue: str, payloads: Sequence[dict[str, Any]]) -> list[str]:
        """Append several messages to a queue, in order, in one atomic step (one round
        trip): all of them, or — when a payload is refused or the call fails — none.
        Returns their ids in order; each appends its ``message.sent`` event as ``send``
        does. A plan's envelopes go out this way instead of one call per task."""

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
        wait: float = 0.0,
    ) -> list[Delivery]:
        """Deliver up to ``max_messages``: new ones, or unacked ones whose visibility
        timeout passed. A message already delivered ``max_deliveries`` times is
        moved to the dead letters instead (and an event says so). A delivery is
        counted before its payload is decoded; one that cannot be decoded comes with
        ``payload == {}`` and ``problem`` saying why (``store.payload``).

        With ``wait`` > 0 an empty queue is waited on for up to that many seconds: the
        call returns as soon as a message is deliverable (sent by any process, given
        back, or its visibility timeout passed), else ``[]`` once the wait is over. A
        member wakes on work instead of sleeping between polls; it keeps each wait
        short (a fraction of a second) and loops, so a stop is never held up long."""

    @abstractmethod
    def ack(self, team: str, queue: str, message_id: str) -> bool:
        """Acknowledge a delivery; an acked message never comes back. False if unknown."""

    @abstractmethod
    def release(self, team: str, queue: str, message_id: str) -> bool:
        """Give a delivery back unacked: it is visible again at once, its delivery count
        kept, so a message no consumer can read reaches the dead letters after
        ``max_deliveries`` quick tries rather than as many visibility timeouts. False if
        it is not an unacked message of the queue."""

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
        """Append an event of the caller's own (verdicts, faults seen); returns its seq.
        ``ProtocolError`` (nothing written) for data over ``MAX_EVENT_BYTES``."""

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

    # --- several writes at once -------------------------------------------------------

    def begin_attempt(
        self,
        team: str,
        task_id: str,
        key: str,
        *,
        epoch: int,
        attempt: int,
        holder: str,
        claim_seconds: float,
        take: bool = False,
        data: Any = UNSET,
    ) -> AttemptStart:
        """Begin one attempt of a task in one atomic step (one round trip).

        In order: the key done → ``replayed`` with its result; the task missing, not
        ``queued``/``running`` at ``attempt``, or assigned to another (unless ``take``:
        queue mode, where the taker becomes the assignee) → ``outdated``, nothing
        written; ``epoch`` stale → ``fenced``; another live holder's claim on the key
        → ``in_progress``; else the key is claimed for ``claim_seconds``
        (``effect.claimed``) and the task marked ``running`` (``task.transition``;
        with ``data`` replacing its data), and the answer is ``run`` with the task as
        written. The same checks and events as ``effect_lookup``, ``get_task``,
        ``effect_begin`` and ``transition`` made one after the other.
        """
        check_epoch("epoch", epoch)
        with self._atomic():
            done = self.effect_lookup(team, key)
            if done is not None:
                return AttemptStart("replayed", self.now(), result=done.result)
            try:
                task = self.get_task(team, task_id)
            except NotFound:
                return AttemptStart("outdated", self.now())
            if not attempt_is_ours(task, attempt, holder, take):
                return AttemptStart("outdated", self.now(), task=task)
            try:
                self.effect_begin(
                    team, key, epoch=epoch, holder=holder, claim_seconds=claim_seconds
                )
            except StaleEpoch as exc:
                return AttemptStart("fenced", self.now(), current=exc.current)
            except EffectInProgress as exc:
                return AttemptStart("in_progress", self.now(), holder=exc.holder)
            running = self.transition(
                team,
                task_id,
                epoch=epoch,
                expect=[task.state],
                to="running",
                version=task.version,
                data=data,
                **({"assignee": holder} if take else {}),
            )
            return AttemptStart("run", running.updated_at, task=running)

    def commit(self, team: str, writes: Sequence[Write]) -> list[Any]:
        """Make ``writes`` in order in one atomic step (one round trip): every check
        first — each ``Move``'s fence and compare-and-set against the state the moves
        before it leave, every value's limits — then every write, each with the event
        its single call appends. Refused: that call's error, and nothing written.

        Returns one answer per write, as its single call would: the ``TaskRecord`` a
        ``Move`` wrote, a ``Note``'s seq, a ``Record``'s ``EffectTicket``, an ``Ack``'s
        bool, a ``Send``'s message id; None for an ``Expect`` (``Conflict`` if the task
        is no longer at its version, ``NotFound`` if it is gone)."""
        with self._atomic():
            self._check_writes(team, writes)
            return [self._write(team, write) for write in writes]

    def _atomic(self) -> AbstractContextManager[object]:
        """What makes the composed ``begin_attempt`` and ``commit`` one atomic step: a
        transaction (SQLite), the state's lock (memory). A backend that overrides both
        (Redis: one script each) need not provide it."""
        raise NotImplementedError(f"{type(self).__name__} has no atomic section")

    def _check_writes(self, team: str, writes: Sequence[Write]) -> None:
        """Every check of ``commit`` before its first write."""
        predicted: dict[str, tuple[TaskState, int]] = {}
        for write in writes:
            if isinstance(write, Move):
                check_epoch("epoch", write.epoch)
                current = self.current_epoch(team)
                if write.epoch < current:
                    raise StaleEpoch(team, write.epoch, current)
                if write.task_id not in predicted:
                    found = self.get_task(team, write.task_id)
                    predicted[write.task_id] = (found.state, found.version)
                state, version = predicted[write.task_id]
                check_move(write.task_id, state, version, write)
                predicted[write.task_id] = (write.to, version + 1)
            elif isinstance(write, Expect):
                if write.task_id not in predicted:
                    found = self.get_task(team, write.task_id)
                    predicted[write.task_id] = (found.state, found.version)
                check_expected(write, predicted[write.task_id][1])
            elif isinstance(write, Note):
                check_event_data(write.data)
                if write.epoch is not None:
                    check_epoch("epoch", write.epoch)
            elif isinstance(write, Send):
                payload_text(write.payload, lambda value: "")

    def _write(self, team: str, write: Write) -> Any:
        if isinstance(write, Move):
            return self.transition(
                team,
                write.task_id,
                epoch=write.epoch,
                expect=write.expect,
                to=write.to,
                version=write.version,
                **write.changes,
            )
        if isinstance(write, Expect):
            return None
        if isinstance(write, Note):
            return self.append_event(team, write.kind, write.data, epoch=write.epoch)
        if isinstance(write, Record):
            return self.effect_finish(team, write.key, holder=write.holder, result=write.result)
        if isinstance(write, Ack):
            return self.ack(team, write.queue, write.message_id)
        return self.send(team, write.queue, write.payload)

    @abstractmethod
    def teams(self) -> list[str]:
        """Every team this store has state for."""

    # --- identity -------------------------------------------------------------------

    def lost_reason(self) -> str | None:
        """Why the store this object opened is not the one at its URL any more (deleted,
        truncated, replaced, emptied), or None while it is. Backends keep an identity
        token written when the store was created and compare it; one that cannot be
        replaced under its members (memory) answers None. ``StoreUnreachable`` when it
        cannot tell."""
        return None

    # --- lifecycle ------------------------------------------------------------------

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default has nothing to release."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
