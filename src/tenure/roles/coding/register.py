"""A coding run in a Tenure store: the team ``code/<run>``, its leadership lease, and a
mirror of ``status.yml`` in the task register and the event log.

``status.yml`` on the integration branch stays the durable contract; the store is the
run's state database: who leads it (a lease and a fencing epoch), the register that
``tenure status`` and ``tenure inbox`` read, the events ``tenure log`` prints, and the
answers ``tenure answer`` leaves there. Every register write carries the leader's epoch,
so a leader whose lease expired is refused (``StaleEpoch``) and stops. A store that lost
the run is rebuilt from ``status.yml`` by the next leader.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors.worktrees import TENURE_DIR
from tenure.protocol.errors import ConfigError, Conflict, NotFound, TenureError
from tenure.roles.coding.files import (
    ACCEPTED,
    BLOCKED,
    CANCELLED,
    DROPPED,
    MERGED,
    NEEDS_OPERATOR,
    PENDING,
    RUNNING,
    SPLIT,
    StatusRow,
)
from tenure.store import ALLOWED_TRANSITIONS, TERMINAL_STATES, Store, TaskRecord, TaskState
from tenure.store import open_store as _open_store

TEAM_PREFIX = "code"
DEFAULT_LEASE_TTL = 10.0

# status.yml state -> register state. A split task is replaced by its parts and a
# dropped one left out of the plan: neither will be done itself, so both are cancelled.
REGISTER_STATE: dict[str, TaskState] = {
    PENDING: "queued",
    RUNNING: "running",
    ACCEPTED: "review",
    MERGED: "done",
    NEEDS_OPERATOR: "blocked",
    BLOCKED: "blocked",
    CANCELLED: "cancelled",
    DROPPED: "cancelled",
    SPLIT: "cancelled",
}


class RunLeased(ConfigError):
    """Another live leader holds the run's lease."""


def team_for(run_id: str) -> str:
    return f"{TEAM_PREFIX}/{run_id}"


def default_store_url(root: Path) -> str:
    """A coding run's default state database: a SQLite file in the repository's .tenure/."""
    return f"sqlite:///{root / TENURE_DIR / 'state.db'}"


def route(start: TaskState, target: TaskState) -> list[TaskState]:
    """The shortest chain of allowed register transitions from ``start`` to ``target``."""
    paths: deque[list[TaskState]] = deque([[start]])
    seen = {start}
    while paths:
        path = paths.popleft()
        for step in sorted(ALLOWED_TRANSITIONS[path[-1]]):
            if step == target:
                return [*path[1:], step]
            if step not in seen:
                seen.add(step)
                paths.append([*path, step])
    return []


class RunRegister:
    """The leader's side of the store for one coding run."""

    def __init__(self, url: str, run_id: str, timing: LeaseTiming) -> None:
        self.url = url
        self.run_id = run_id
        self.team = team_for(run_id)
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self.timing = timing
        self.store: Store | None = None
        self.keeper: LeaseKeeper | None = None
        self.qa_seen: dict[str, int] = {}
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # --- the lease -------------------------------------------------------------------

    def claim(self, *, at_least: int = 0) -> int:
        """Take the run's lease (refused while another leader holds it) and keep renewing
        it on a thread of its own; returns the epoch to write under."""
        store = self.store = self.store or _open_store(self.url)
        keeper = self.keeper = LeaseKeeper(store, self.team, self.holder, self.timing)
        self._release_dead_holder(store)
        try:
            lease = keeper.claim(at_least=at_least)
        except Conflict:
            why = self._refusal(store)
            store.close()
            self.store = self.keeper = None
            raise RunLeased(why) from None
        self.qa_seen = {t.task_id: int(t.data.get("qa_seen", 0)) for t in self.tasks()}
        self._stop.clear()
        self._renewer = threading.Thread(
            target=self._renew_loop, daemon=True, name=f"tenure-renew-{self.team}"
        )
        self._renewer.start()
        return lease.epoch

    def _refusal(self, store: Store) -> str:
        lease = store.current_lease(self.team)
        if lease is None:
            return f"run {self.run_id}: its lease was taken at the same moment; run again"
        left = max(0.0, lease.expires_at - store.now())
        return (
            f"run {self.run_id} is already led by {lease.holder} (epoch {lease.epoch}, lease "
            f"live for {left:.0f}s more): wait for that `tenure code` to finish, or stop it "
            "and run this again once its lease has expired"
        )

    def _release_dead_holder(self, store: Store) -> None:
        """A holder on this host whose process is gone (killed) cannot renew: release its
        lease now instead of making a resume wait for the TTL. A live or stopped process
        keeps its lease until it expires."""
        lease = store.current_lease(self.team)
        if lease is None:
            return
        host, _, pid = lease.holder.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
            return
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            store.release_lease(self.team, lease.holder, lease.epoch)
        except PermissionError:
            return

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.timing.renew_every):
            keeper = self.keeper
            if keeper is not None and keeper.valid():
                keeper.renew()

    def fence(self) -> int:
        """The epoch to act under; ``LeaseLost`` once the lease's deadline has passed."""
        if self.keeper is None:
            raise ConfigError(f"run {self.run_id}: the lease was never claimed")
        return self.keeper.check()

    @property
    def epoch(self) -> int:
        return self.keeper.epoch if self.keeper else 0

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if self.keeper is not None:
            self.keeper.release()
        if self.store is not None:
            self.store.close()
            self.store = None

    def lost(self, why: str) -> None:
        """Record that this leader lost the lease (unfenced: it is a fact, not a write to
        the run); best effort, since the store may be what failed."""
        try:
            self._store().append_event(
                self.team,
                "code.lease_lost",
                {"holder": self.holder, "epoch": self.epoch, "why": why},
            )
        except TenureError:
            pass

    # --- the register and the event log -------------------------------------------

    def _store(self) -> Store:
        if self.store is None:
            raise ConfigError(f"run {self.run_id}: the store is not open")
        return self.store

    def tasks(self) -> list[TaskRecord]:
        return self._store().tasks(self.team)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self._store().append_event(self.team, f"code.{kind}", data, epoch=self.fence())

    def answers(self) -> dict[str, list[dict[str, Any]]]:
        """Answers ``tenure answer`` added since the leader last took them, per task."""
        found: dict[str, list[dict[str, Any]]] = {}
        for record in self.tasks():
            qa = list(record.data.get("qa", []))
            seen = self.qa_seen.get(record.task_id, 0)
            if len(qa) > seen:
                found[record.task_id] = qa[seen:]
        return found

    def cancelled(self) -> dict[str, str]:
        """Tasks whose register record is cancelled, with the reason given: the
        leader's own mirror of a cancelled row, or ``tenure cancel`` by an operator."""
        return {
            r.task_id: r.reason or "no reason given" for r in self.tasks() if r.state == "cancelled"
        }

    def taken(self, task_id: str, count: int) -> None:
        """Answers up to ``count`` are in the task file; the next sync records it."""
        self.qa_seen[task_id] = count

    def sync(self, rows: dict[str, StatusRow], spec_for: Callable[[str], dict[str, Any]]) -> None:
        """Mirror every row into the register under the leader's epoch (fenced)."""
        epoch = self.fence()
        store = self._store()
        records = {r.task_id: r for r in self.tasks()}
        for row in rows.values():
            record = records.get(row.id)
            if record is None:
                # a final state is reached through the register's own transitions, so
                # the record gets its fields (and the log its steps) like any other
                target = REGISTER_STATE[row.state]
                first: dict[TaskState, TaskState] = {"done": "review", "cancelled": "queued"}
                state = first.get(target, target)
                record = store.create_task(
                    self.team, row.id, epoch=epoch, spec=spec_for(row.id), state=state
                )
            try:
                self._mirror(store, record, row, epoch)
            except (Conflict, NotFound):
                continue  # an operator's answer raced this write: taken on the next loop

    def _mirror(self, store: Store, record: TaskRecord, row: StatusRow, epoch: int) -> None:
        qa = record.data.get("qa", [])
        if len(qa) > self.qa_seen.get(row.id, 0):
            return  # answered and not yet taken: leave the operator's re-queue in place
        target = REGISTER_STATE[row.state]
        data = {
            **record.data,
            "run": self.run_id,
            "coding_state": row.state,
            "branch": row.branch,
            "history": row.history[-5:],
            "qa_seen": self.qa_seen.get(row.id, 0),
        }
        data.pop("question", None)
        if row.state == NEEDS_OPERATOR:
            data["question"] = row.reason
        fields: dict[str, Any] = {
            "assignee": row.worker or None,
            "attempt": row.attempt,
            "reason": row.reason,
            "data": data,
        }
        unchanged = all(getattr(record, k) == v for k, v in fields.items())
        if record.state == target and unchanged:
            return
        if record.state in TERMINAL_STATES:
            return  # done and cancelled are final in the register (see docs)
        steps = [target] if record.state == target else route(record.state, target)
        version = record.version
        for n, step in enumerate(steps):
            extra = fields if n == len(steps) - 1 else {}
            record = store.transition(
                self.team,
                row.id,
                epoch=epoch,
                expect=[record.state],
                to=step,
                version=version,
                **extra,
            )
            version = record.version
