"""The task register and the idempotency ledger in memory."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tenure.protocol.errors import Conflict, EffectInProgress, NotFound, ProtocolError
from tenure.protocol.secrets import redact_text
from tenure.store.base import UNSET
from tenure.store.memory.core import MemoryBase, dumps, loads, positive
from tenure.store.memory.state import EffectRow, TaskRow
from tenure.store.records import EffectTicket, TaskRecord, TaskState
from tenure.store.rules import check_cas, check_epoch

_QUIET_FIELDS = ("data", "spec")
"""Fields whose values ``task.transition`` leaves out (a replaced spec is noted, not copied)."""


class RegisterMixin(MemoryBase):
    def create_task(
        self,
        team: str,
        task_id: str,
        *,
        epoch: int,
        spec: dict[str, Any],
        state: TaskState = "queued",
    ) -> TaskRecord:
        check_epoch("epoch", epoch)
        with self.memory.lock:
            self._fence(team, epoch)
            tasks = self.memory.team(team).tasks
            if task_id in tasks:
                raise Conflict(f"team {team!r}: task {task_id!r} already exists")
            now = self.now()
            row = TaskRow(state, 1, epoch, 0, None, dumps(spec), None, "", "{}", now, now)
            tasks[task_id] = row
            self._event(team, "task.created", {"task_id": task_id, "state": state}, epoch, at=now)
            return _record(team, task_id, row)

    def create_tasks(
        self, team: str, tasks: Sequence[tuple[str, dict[str, Any]]], *, epoch: int
    ) -> list[TaskRecord]:
        check_epoch("epoch", epoch)
        rows = [(task_id, dumps(spec)) for task_id, spec in tasks]  # may refuse: before writes
        with self.memory.lock:
            self._fence(team, epoch)
            registered = self.memory.team(team).tasks
            now = self.now()
            created = []
            for task_id, spec in rows:
                if task_id in registered:
                    continue
                row = TaskRow("queued", 1, epoch, 0, None, spec, None, "", "{}", now, now)
                registered[task_id] = row
                data = {"task_id": task_id, "state": "queued"}
                self._event(team, "task.created", data, epoch, at=now)
                created.append(_record(team, task_id, row))
            return created

    def clear_tasks(self, team: str, *, epoch: int) -> int:
        check_epoch("epoch", epoch)
        with self.memory.lock:
            self._fence(team, epoch)
            tasks = self.memory.team(team).tasks
            count = len(tasks)
            tasks.clear()
            self._event(team, "register.cleared", {"count": count}, epoch, at=self.now())
            return count

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
        given = {
            k: v
            for k, v in (
                ("assignee", assignee),
                ("attempt", attempt),
                ("result", result),
                ("reason", reason),
                ("data", data),
                ("spec", spec),
            )
            if v is not UNSET
        }
        stored = _stored(given)  # before the lock: a value that cannot be stored changes nothing
        with self.memory.lock:
            self._fence(team, epoch)
            row = self._row(team, task_id)
            before = row.state
            check_cas(_record(team, task_id, row), expected, to, version)
            now = self.now()
            for name, value in stored.items():
                setattr(row, name, value)
            row.state, row.version, row.epoch, row.updated_at = to, row.version + 1, epoch, now
            event: dict[str, Any] = {
                "task_id": task_id,
                "from": before,
                "to": to,
                "version": row.version,
            }
            event.update({k: v for k, v in given.items() if k not in _QUIET_FIELDS})
            if "spec" in given:
                event["spec"] = True
            if "data" in given:
                event["data"] = True
            self._event(team, "task.transition", event, epoch, at=now)
            return _record(team, task_id, row)

    def get_task(self, team: str, task_id: str) -> TaskRecord:
        with self.memory.lock:
            return _record(team, task_id, self._row(team, task_id))

    def tasks(self, team: str) -> list[TaskRecord]:
        with self.memory.lock:
            rows = list(self.memory.team(team).tasks.items())
            return [_record(team, task_id, row) for task_id, row in rows]

    def _row(self, team: str, task_id: str) -> TaskRow:
        row = self.memory.team(team).tasks.get(task_id)
        if row is None:
            raise NotFound(f"team {team!r}: no task {task_id!r}")
        return row

    # --- idempotency ledger -------------------------------------------------------------

    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        check_epoch("epoch", epoch)
        positive("claim_seconds", claim_seconds)
        with self.memory.lock:
            self._fence(team, epoch)
            now = self.now()
            effects = self.memory.team(team).effects
            row = effects.get(key)
            if row is not None and row.status == "done":
                return EffectTicket(key, "done", loads(row.result or "null"))
            if (
                row is not None
                and row.holder != holder
                and row.claim_expires > now
                and not self._holder_gone(team, row.holder, row.tie, now)
            ):
                raise EffectInProgress(key, row.holder)
            tie = self._tie(team, holder, now)
            effects[key] = EffectRow("running", holder, now + claim_seconds, epoch, tie=tie)
            self._event(team, "effect.claimed", {"key": key, "holder": holder}, epoch, at=now)
            return EffectTicket(key, "run")

    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        stored = dumps(result)
        with self.memory.lock:
            effects = self.memory.team(team).effects
            row = effects.get(key)
            if row is not None and row.status == "done":
                return EffectTicket(key, "done", loads(row.result or "null"))
            epoch = row.epoch if row is not None else 0
            effects[key] = EffectRow("done", holder, 0.0, epoch, stored)
            self._event(team, "effect.done", {"key": key, "holder": holder}, epoch, at=self.now())
            return EffectTicket(key, "done", loads(stored))

    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        with self.memory.lock:
            effects = self.memory.team(team).effects
            row = effects.get(key)
            if row is None or row.status != "running" or row.holder != holder:
                return
            del effects[key]
            self._event(team, "effect.aborted", {"key": key, "holder": holder}, None, at=self.now())

    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        with self.memory.lock:
            row = self.memory.team(team).effects.get(key)
            if row is None or row.status != "done":
                return None
            return EffectTicket(key, "done", loads(row.result or "null"))


def _stored(given: dict[str, Any]) -> dict[str, Any]:
    """The given fields as a ``TaskRow`` keeps them (JSON text for the documents)."""
    stored: dict[str, Any] = {}
    for name, value in given.items():
        if name == "attempt" and not isinstance(value, int):
            raise ProtocolError("attempt", f"a whole number, got {value!r}")
        if name in ("assignee", "result") and value is None:
            stored[name] = None
        elif name in ("result", "data", "spec"):
            stored[name] = dumps(value)
        elif name == "attempt":
            stored[name] = int(value)
        else:  # assignee, reason
            stored[name] = "" if value is None else redact_text(str(value))
    return stored


def _record(team: str, task_id: str, row: TaskRow) -> TaskRecord:
    return TaskRecord(
        team=team,
        task_id=task_id,
        state=row.state,
        version=row.version,
        epoch=row.epoch,
        attempt=row.attempt,
        assignee=row.assignee,
        spec=loads(row.spec),
        result=loads(row.result) if row.result is not None else None,
        reason=row.reason,
        data=loads(row.data),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
