"""A store that holds writes back and makes them in one ``commit``.

Judging a result is a handful of writes (record it, move the task to review, the
verdicts, accept it, acknowledge the message). ``StagedStore`` lets the code that
judges — the same reviewer, register and hooks as always — write to a stand-in that
predicts each write's answer and keeps it, so that ``commit()`` makes them all in
one atomic step and one round trip. Reads go to the real store, except the tasks
written here, which read as written.

A write the stand-in cannot hold (a lease, a new task, a claim) raises
``Unstageable``; a prediction that turns out wrong (someone else moved the task
meanwhile) makes ``commit`` refuse with the error the single call would have
raised, having written nothing. Either way the caller does the work again on the
real store: staging changes how many round trips a step takes, never what it does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from tenure.protocol.errors import StoreError
from tenure.store.base import UNSET, Store
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
from tenure.store.rules import check_cas, check_epoch
from tenure.store.writes import (
    MOVE_FIELDS,
    Ack,
    AttemptStart,
    Expect,
    Move,
    Note,
    Record,
    Send,
    Write,
)


class Unstageable(StoreError):
    """A write a ``StagedStore`` cannot hold back: make the step on the real store."""


class StagedStore(Store):
    """Stands in for ``inner`` while a step is prepared; ``commit()`` makes its writes.

    ``now`` is the store clock as the step sees it (by default the store's clock read
    once and carried on: a step's writes cost no round trip each for the time);
    ``tasks`` are records already read, so the step does not read them again."""

    def __init__(
        self,
        inner: Store,
        *,
        now: Callable[[], float] | None = None,
        tasks: Iterable[TaskRecord] = (),
    ) -> None:
        self.inner = inner
        self.url = inner.url
        self.writes: list[Write] = []
        self._now = now or self._carried_clock()
        self._records: dict[tuple[str, str], TaskRecord] = {(t.team, t.task_id): t for t in tasks}
        self._read: dict[str, int] = {}  # task -> the version the step read it at
        self._team: str | None = None

    @classmethod
    def after(cls, inner: Store, start: AttemptStart) -> StagedStore:
        """Staging for the rest of an attempt ``begin_attempt`` started: its clock and
        the task as it left it."""
        began = time.monotonic()
        return cls(
            inner,
            now=lambda: start.now + (time.monotonic() - began),
            tasks=[start.task] if start.task is not None else [],
        )

    def _carried_clock(self) -> Callable[[], float]:
        """The store's clock read once, when first asked, and carried on from there."""
        read: list[tuple[float, float]] = []

        def now() -> float:
            if not read:
                read.append((self.inner.now(), time.monotonic()))
            store_now, at = read[0]
            return store_now + (time.monotonic() - at)

        return now

    def commit_staged(self, team: str, *more: Write) -> list[Any]:
        """Make every staged write of ``team``, then ``more``, in one ``commit`` — on
        condition that each task the step read and did not move is still as it read it
        (an ``Expect`` each, first): a step that decided on a task without writing it
        must not be committed once that task has changed."""
        if self._team not in (None, team):
            raise Unstageable(f"the staged writes are team {self._team!r}'s, not {team!r}'s")
        moved = {w.task_id for w in self.writes if isinstance(w, Move)}
        guards = [Expect(t, v) for t, v in self._read.items() if t not in moved]
        answers = self.inner.commit(team, [*guards, *self.writes, *more])
        return answers[len(guards) :]

    def _stage(self, team: str, write: Write) -> None:
        if self._team is not None and team != self._team:
            raise Unstageable(f"a staged step writes one team, not {self._team!r} and {team!r}")
        self._team = team
        self.writes.append(write)

    # --- what is staged --------------------------------------------------------------------

    def now(self) -> float:
        return self._now()

    def clock_is_remote(self) -> bool:
        return self.inner.clock_is_remote()

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
        check_epoch("epoch", epoch)
        expected = frozenset(expect)
        current = self.get_task(team, task_id)
        check_cas(current, expected, to, version)
        values = (assignee, attempt, result, reason, data, spec)
        changes = {k: v for k, v in zip(MOVE_FIELDS, values, strict=True) if v is not UNSET}
        self._stage(team, Move(task_id, epoch, tuple(expected), to, current.version, changes))
        written = replace(
            current,
            state=to,
            version=current.version + 1,
            epoch=epoch,
            updated_at=self.now(),
            **changes,
        )
        self._records[(team, task_id)] = written
        return written

    def get_task(self, team: str, task_id: str) -> TaskRecord:
        record = self._records.get((team, task_id))
        if record is None:
            record = self.inner.get_task(team, task_id)
            self._records[(team, task_id)] = record
        self._served(team, record)
        return record

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        missing = [t for t in task_ids if (team, t) not in self._records]
        if missing:
            for record in self.inner.get_tasks(team, missing):
                self._records[(team, record.task_id)] = record
        found = []
        for task_id in dict.fromkeys(task_ids):
            known = self._records.get((team, task_id))
            if known is not None:
                self._served(team, known)
                found.append(known)
        return found

    def _served(self, team: str, record: TaskRecord) -> None:
        """The first version of a task the step saw: its commit expects it still there."""
        if team == (self._team or team):
            self._read.setdefault(record.task_id, record.version)

    def tasks(self, team: str) -> list[TaskRecord]:
        return [self._records.get((team, t.task_id), t) for t in self.inner.tasks(team)]

    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        self._stage(team, Record(key, holder, result))
        return EffectTicket(key, "done", result)

    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        check_event_data(data)
        if epoch is not None:
            check_epoch("epoch", epoch)
        self._stage(team, Note(kind, data, epoch))
        return 0  # its seq is known once committed

    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        payload_text(payload, lambda value: "")
        self._stage(team, Send(queue, payload))
        return ""  # its id is known once committed

    def send_many(self, team: str, queue: str, payloads: Sequence[dict[str, Any]]) -> list[str]:
        return [self.send(team, queue, payload) for payload in payloads]

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        self._stage(team, Ack(queue, message_id))
        return True

    # --- reads go to the real store --------------------------------------------------------

    def current_lease(self, team: str) -> Lease | None:
        return self.inner.current_lease(team)

    def current_epoch(self, team: str) -> int:
        return self.inner.current_epoch(team)

    def members(self, team: str) -> list[Member]:
        return self.inner.members(team)

    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        return self.inner.effect_lookup(team, key)

    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        return self.inner.dead_letters(team, queue)

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        return self.inner.events(team, after=after, limit=limit)

    def last_event_seq(self, team: str) -> int:
        return self.inner.last_event_seq(team)

    def teams(self) -> list[str]:
        return self.inner.teams()

    # --- what cannot wait for a commit -----------------------------------------------------

    def _unstageable(self, what: str) -> Unstageable:
        return Unstageable(f"{what} is not staged: make this step on the store itself")

    def claim_lease(self, team: str, holder: str, ttl: float, **kw: Any) -> Lease:
        raise self._unstageable("a lease claim")

    def seize_lease(self, team: str, holder: str, ttl: float, **kw: Any) -> Lease:
        raise self._unstageable("a lease seizure")

    def prove_lease(self, team: str, holder: str, epoch: int, proof: str, **kw: Any) -> Lease:
        raise self._unstageable("a lease proof")

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float, **kw: Any) -> Lease:
        raise self._unstageable("a lease renewal")

    def release_lease(self, team: str, holder: str, epoch: int, **kw: Any) -> bool:
        raise self._unstageable("a lease release")

    def join(self, team: str, member_id: str, **kw: Any) -> Member:
        raise self._unstageable("a join")

    def heartbeat(self, team: str, member_id: str, **kw: Any) -> Member:
        raise self._unstageable("a heartbeat")

    def leave(self, team: str, member_id: str) -> None:
        raise self._unstageable("a leave")

    def create_task(self, team: str, task_id: str, **kw: Any) -> TaskRecord:
        raise self._unstageable("a new task")

    def create_tasks(
        self, team: str, tasks: Sequence[tuple[str, dict[str, Any]]], *, epoch: int
    ) -> list[TaskRecord]:
        raise self._unstageable("new tasks")

    def clear_tasks(self, team: str, *, epoch: int) -> int:
        raise self._unstageable("clearing the register")

    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        raise self._unstageable("a claim")

    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        raise self._unstageable("giving a claim back")

    def receive(self, team: str, queue: str, **kw: Any) -> list[Delivery]:
        raise self._unstageable("a receive")

    def release(self, team: str, queue: str, message_id: str) -> bool:
        raise self._unstageable("giving a delivery back")

    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        raise self._unstageable("dropping dead letters")

    def trim_events(self, team: str, before_seq: int) -> int:
        raise self._unstageable("trimming events")

    def commit(self, team: str, writes: Sequence[Write]) -> list[Any]:
        raise self._unstageable("a commit inside a staged step")

    def close(self) -> None:
        """The real store stays open: it belongs to whoever staged on it."""
