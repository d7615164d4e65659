"""A member's store: rides out an outage, and notices a store that was replaced.

A member (leader, worker, ``tenure run``) opens its store through ``PatientStore``.
When the backend does not answer (``StoreUnreachable``: Redis down or paused, a
SQLite lock held too long), a call waits with backoff instead of failing, the member
says once that it is waiting and once that the store is back, and once back it
appends a ``member.store_outage`` event with the outage's start, end and length.

Only calls that may be repeated are retried: reads, renewals, heartbeats, effect
claims (one holder's claim is its own again), deliveries and acks. A write whose
reply was lost may have been applied (a Redis script runs when the server resumes),
and a leader must not repeat a write after its lease deadline: those calls wait
until the store answers again, then raise ``StoreUnreachable`` once, and the caller
decides as it always did for an unknown outcome (its next write checks its lease).

Every ``identity_every`` seconds, and when an outage ends, the store's identity is
checked (``Store.lost_reason``). A store found replaced, emptied or destroyed — or
one unreachable past ``patience`` seconds — is lost: the member is told
(``on_lost``), and every later call raises ``StoreLost``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from tenure.protocol.errors import ConfigError, StoreLost, StoreUnreachable, TenureError
from tenure.protocol.secrets import redact_url
from tenure.store.base import DEFAULT_MAX_DELIVERIES, UNSET, Store
from tenure.store.records import Delivery, EffectTicket, Event, Lease, Member, TaskRecord, TaskState
from tenure.store.writes import AttemptStart, Write

T = TypeVar("T")
PATIENCE_VAR = "TENURE_STORE_PATIENCE"
DEFAULT_PATIENCE = 300.0
MAX_PATIENCE = 7 * 24 * 3600.0
"""Seconds a member waits for an unreachable store before it gives up (exit status 4)."""
IDENTITY_EVERY = 1.0
OUTAGE_EVENT = "member.store_outage"
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 1.0


def patience_from_env() -> float:
    """``$TENURE_STORE_PATIENCE`` seconds (default 300); a bad value is one line."""
    raw = os.environ.get(PATIENCE_VAR, "").strip()
    if not raw:
        return DEFAULT_PATIENCE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_PATIENCE:  # NaN and infinity too: a wait must end
        raise ConfigError(
            f"{PATIENCE_VAR}: a positive number of seconds, at most {MAX_PATIENCE:g} "
            f"(a week), got {raw!r}"
        )
    return value


def clock_time(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


class Outage:
    """One process's view of its store's reachability: when an outage began, what to
    say, and when waiting has lasted too long. Shared by every thread of a member."""

    def __init__(
        self,
        url: str,
        patience: float,
        say: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.url = redact_url(url)
        self.patience = patience
        self.say = say
        self.clock = clock
        self.wall = wall
        self.since: tuple[float, float] | None = None  # (monotonic, wall) of the first failure
        self._lock = threading.Lock()

    def failed(self) -> float:
        """Note a failure; return how long the store has been unreachable."""
        with self._lock:
            if self.since is None:
                self.since = (self.clock(), self.wall())
                self.say(
                    f"store unreachable since {clock_time(self.since[1])} ({self.url}): "
                    "waiting; Ctrl-C to stop"
                )
            return self.clock() - self.since[0]

    def answered(self) -> tuple[float, float] | None:
        """Note a success; the (start, end) wall times of the outage it ends, if any."""
        if self.since is None:
            return None
        with self._lock:
            if self.since is None:
                return None
            start, end = self.since[1], self.wall()
            self.since = None
        self.say(
            f"store reachable again at {clock_time(end)} after {end - start:.1f}s ({self.url})"
        )
        return start, end


class PatientStore(Store):
    """``inner`` with its outages ridden out and its identity watched, for one member."""

    def __init__(
        self,
        inner: Store,
        *,
        team: str,
        member: str,
        patience: float | None = None,
        say: Callable[[str], None] = lambda line: None,
        on_lost: Callable[[str], None] = lambda reason: None,
        stop: threading.Event | None = None,
        identity_every: float = IDENTITY_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.url = inner.url
        self.team = team
        self.member = member
        self.outage = Outage(
            inner.url, patience_from_env() if patience is None else patience, say, clock=clock
        )
        self.on_lost = on_lost
        self.stop = stop or threading.Event()
        self.identity_every = identity_every
        self.clock = clock
        self.lost: str | None = None
        self._checked = float("-inf")
        self._checking = threading.Lock()

    # --- the two ways of calling ------------------------------------------------------

    def _retried(self, call: Callable[[], T]) -> T:
        """A call that may be repeated: repeated until it answers."""
        self._watch_identity()
        delay = FIRST_BACKOFF
        while True:
            try:
                value = call()
            except StoreUnreachable as exc:
                delay = self._wait(exc, delay)
                continue
            self._answered()
            return value

    def _once(self, call: Callable[[], T]) -> T:
        """A write: made once; if its outcome is unknown, raised once the store answers."""
        self._watch_identity()
        try:
            value = call()
        except StoreUnreachable as exc:
            self.outage.failed()
            self._retried(self.inner.now)  # wait for the store, then say what is unknown
            raise StoreUnreachable(f"{exc}; whether that write was made is unknown") from exc
        self._answered()
        return value

    def _wait(self, exc: StoreUnreachable, delay: float) -> float:
        self._raise_if_lost()
        waited = self.outage.failed()
        if waited > self.outage.patience:
            self._lose(
                f"store unreachable for {waited:.0f}s ({self.outage.url}): gave up "
                f"(patience {self.outage.patience:g}s, {PATIENCE_VAR})"
            )
            self._raise_if_lost()
        if self.stop.is_set():
            raise exc  # the member is stopping: it waits for nothing
        self.stop.wait(delay)
        return min(delay * 2, MAX_BACKOFF)

    def _answered(self) -> None:
        ended = self.outage.answered()
        if ended is None:
            return
        self._watch_identity(force=True)  # a server restarted empty answers too
        start, end = ended
        data = {"member": self.member, "start": start, "end": end, "seconds": round(end - start, 3)}
        try:
            self.inner.append_event(self.team, OUTAGE_EVENT, {**data, "store": self.outage.url})
        except TenureError:
            pass  # the next outage line says it again; the event is an account, not a duty

    # --- identity ---------------------------------------------------------------------

    def confirm(self) -> None:
        """Check the store's identity now, waiting for the store if it is away:
        ``StoreLost`` if it was replaced. A member calls it before it reports success."""
        self.lost_reason()
        self._raise_if_lost()

    def _watch_identity(self, *, force: bool = False) -> None:
        self._raise_if_lost()
        if not force and self.clock() - self._checked < self.identity_every:
            return
        if not self._checking.acquire(blocking=force):
            return  # another thread is looking
        try:
            reason = self.inner.lost_reason()
        except StoreUnreachable:
            self.outage.failed()
            return  # never waits here: a write must not be held past its lease
        finally:
            self._checking.release()
        self._checked = self.clock()
        if reason is not None:
            self._lose(f"{reason}; stopping")
        self._raise_if_lost()

    def _retried_bare(self, call: Callable[[], T]) -> T:
        delay = FIRST_BACKOFF
        while True:
            try:
                return call()
            except StoreUnreachable as exc:
                delay = self._wait(exc, delay)

    def _lose(self, reason: str) -> None:
        if self.lost is not None:
            return
        self.lost = reason
        self.on_lost(reason)

    def _raise_if_lost(self) -> None:
        if self.lost is not None:
            raise StoreLost(self.lost)

    # --- clock and lease ------------------------------------------------------------------

    def now(self) -> float:
        return self._retried(self.inner.now)

    def clock_is_remote(self) -> bool:
        return self.inner.clock_is_remote()

    def claim_lease(
        self, team: str, holder: str, ttl: float, *, token: str, at_least: int = 0
    ) -> Lease:
        return self._once(
            lambda: self.inner.claim_lease(team, holder, ttl, token=token, at_least=at_least)
        )

    def seize_lease(
        self, team: str, holder: str, ttl: float, *, over: Lease, token: str, at_least: int = 0
    ) -> Lease:
        return self._once(
            lambda: self.inner.seize_lease(
                team, holder, ttl, over=over, token=token, at_least=at_least
            )
        )

    def prove_lease(self, team: str, holder: str, epoch: int, proof: str, *, token: str) -> Lease:
        # attaching the same proof again is harmless: safe to repeat
        return self._retried(
            lambda: self.inner.prove_lease(team, holder, epoch, proof, token=token)
        )

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float, *, token: str) -> Lease:
        return self._retried(lambda: self.inner.renew_lease(team, holder, epoch, ttl, token=token))

    def release_lease(self, team: str, holder: str, epoch: int, *, token: str) -> bool:
        return self._retried(lambda: self.inner.release_lease(team, holder, epoch, token=token))

    def current_lease(self, team: str) -> Lease | None:
        return self._retried(lambda: self.inner.current_lease(team))

    def current_epoch(self, team: str) -> int:
        return self._retried(lambda: self.inner.current_epoch(team))

    # --- membership -----------------------------------------------------------------------

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
        caps = tuple(capabilities)
        # safe to repeat: a join that was applied is ours (same incarnation) next time
        return self._retried(
            lambda: self.inner.join(
                team,
                member_id,
                ttl=ttl,
                priority=priority,
                capabilities=caps,
                highest_epoch=highest_epoch,
                incarnation=incarnation,
                slots=slots,
                free_slots=free_slots,
            )
        )

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
        return self._retried(
            lambda: self.inner.heartbeat(
                team,
                member_id,
                ttl=ttl,
                highest_epoch=highest_epoch,
                incarnation=incarnation,
                free_slots=free_slots,
            )
        )

    def leave(self, team: str, member_id: str) -> None:
        self._retried(lambda: self.inner.leave(team, member_id))

    def members(self, team: str) -> list[Member]:
        return self._retried(lambda: self.inner.members(team))

    # --- register -------------------------------------------------------------------------

    def create_task(
        self,
        team: str,
        task_id: str,
        *,
        epoch: int,
        spec: dict[str, Any],
        state: TaskState = "queued",
    ) -> TaskRecord:
        return self._once(
            lambda: self.inner.create_task(team, task_id, epoch=epoch, spec=spec, state=state)
        )

    def create_tasks(
        self, team: str, tasks: Sequence[tuple[str, dict[str, Any]]], *, epoch: int
    ) -> list[TaskRecord]:
        return self._once(lambda: self.inner.create_tasks(team, tasks, epoch=epoch))

    def clear_tasks(self, team: str, *, epoch: int) -> int:
        return self._once(lambda: self.inner.clear_tasks(team, epoch=epoch))

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
        expected = tuple(expect)
        return self._once(
            lambda: self.inner.transition(
                team,
                task_id,
                epoch=epoch,
                expect=expected,
                to=to,
                version=version,
                assignee=assignee,
                attempt=attempt,
                result=result,
                reason=reason,
                data=data,
                spec=spec,
            )
        )

    def get_task(self, team: str, task_id: str) -> TaskRecord:
        return self._retried(lambda: self.inner.get_task(team, task_id))

    def tasks(self, team: str) -> list[TaskRecord]:
        return self._retried(lambda: self.inner.tasks(team))

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        return self._retried(lambda: self.inner.get_tasks(team, task_ids))

    # --- idempotency ledger ---------------------------------------------------------------

    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        return self._retried(
            lambda: self.inner.effect_begin(
                team, key, epoch=epoch, holder=holder, claim_seconds=claim_seconds
            )
        )

    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        return self._retried(
            lambda: self.inner.effect_finish(team, key, holder=holder, result=result)
        )

    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        self._retried(lambda: self.inner.effect_abort(team, key, holder=holder))

    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        return self._retried(lambda: self.inner.effect_lookup(team, key))

    # --- several writes at once -------------------------------------------------------------

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
        # repeated after a lost reply, it finds its own claim and its own running mark:
        # the same holder beginning again runs again (``effect_begin``'s rule)
        return self._retried(
            lambda: self.inner.begin_attempt(
                team,
                task_id,
                key,
                epoch=epoch,
                attempt=attempt,
                holder=holder,
                claim_seconds=claim_seconds,
                take=take,
                data=data,
            )
        )

    def commit(self, team: str, writes: Sequence[Write]) -> list[Any]:
        return self._once(lambda: self.inner.commit(team, writes))

    # --- messages -------------------------------------------------------------------------

    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        return self._once(lambda: self.inner.send(team, queue, payload))

    def send_many(self, team: str, queue: str, payloads: Sequence[dict[str, Any]]) -> list[str]:
        return self._once(lambda: self.inner.send_many(team, queue, payloads))

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
        # a delivery whose reply was lost comes back after its visibility timeout
        return self._retried(
            lambda: self.inner.receive(
                team,
                queue,
                consumer=consumer,
                visibility_timeout=visibility_timeout,
                max_messages=max_messages,
                max_deliveries=max_deliveries,
                wait=wait,
            )
        )

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        return self._retried(lambda: self.inner.ack(team, queue, message_id))

    def release(self, team: str, queue: str, message_id: str) -> bool:
        return self._retried(lambda: self.inner.release(team, queue, message_id))

    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        return self._retried(lambda: self.inner.dead_letters(team, queue))

    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        return self._once(lambda: self.inner.drop_dead_letters(team, queue))

    # --- events ---------------------------------------------------------------------------

    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        return self._once(lambda: self.inner.append_event(team, kind, data, epoch=epoch))

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        return self._retried(lambda: self.inner.events(team, after=after, limit=limit))

    def last_event_seq(self, team: str) -> int:
        return self._retried(lambda: self.inner.last_event_seq(team))

    def trim_events(self, team: str, before_seq: int) -> int:
        return self._once(lambda: self.inner.trim_events(team, before_seq))

    def teams(self) -> list[str]:
        return self._retried(self.inner.teams)

    def lost_reason(self) -> str | None:
        if self.lost is None:
            reason = self._retried_bare(self.inner.lost_reason)
            if reason is not None:
                self._lose(f"{reason}; stopping")
        return self.lost

    def close(self) -> None:
        self.inner.close()
