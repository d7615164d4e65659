"""The task register and the idempotency ledger on Redis (one hash per task / key)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tenure.protocol.errors import Conflict, EffectInProgress, NotFound, ProtocolError
from tenure.protocol.secrets import redact_text
from tenure.store.base import UNSET, check_cas, check_epoch
from tenure.store.records import EffectTicket, TaskRecord, TaskState
from tenure.store.redis.core import RedisBase, at, dumps, micros
from tenure.store.redis.scripts import TASK_FIELDS

_NULLABLE = ("assignee", "result")
_JSON_FIELDS = ("result", "data", "spec")
_QUIET_FIELDS = ("data", "spec")
"""Fields whose values ``task.transition`` leaves out (a replaced spec is noted, not copied)."""


class RegisterMixin(RedisBase):
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
        spec_json = dumps(spec)
        reply = self._run(
            "create_task",
            team,
            [self._task_key(team, task_id), self.keys.team(team, "tasks")],
            [task_id, int(epoch), state, spec_json, dumps({"task_id": task_id, "state": state})],
        )
        self._stale(team, epoch, reply)
        if reply[0] == "exists":
            raise Conflict(f"team {team!r}: task {task_id!r} already exists")
        now = at(reply[1])
        return TaskRecord(
            team=team,
            task_id=task_id,
            state=state,
            version=1,
            epoch=int(epoch),
            attempt=0,
            assignee=None,
            spec=json.loads(spec_json),
            result=None,
            reason="",
            data={},
            created_at=now,
            updated_at=now,
        )

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
        changes = {
            "assignee": assignee,
            "attempt": attempt,
            "result": result,
            "reason": reason,
            "data": data,
            "spec": spec,
        }
        given = {k: v for k, v in changes.items() if v is not UNSET}
        drop = [k for k in _NULLABLE if k in given and given[k] is None]
        pairs: list[Any] = []
        for name, value in given.items():
            if name in drop:
                continue
            pairs += [name, _stored(name, value)]
        event: dict[str, Any] = {"task_id": task_id, "to": to}
        event.update({k: v for k, v in given.items() if k not in _QUIET_FIELDS})
        if "spec" in given:
            event["spec"] = True
        reply = self._run(
            "transition",
            team,
            [self._task_key(team, task_id)],
            [
                task_id,
                int(epoch),
                ",".join(sorted(expected)),
                to,
                "" if version is None else int(version),
                dumps(event),
                ",".join(drop),
                *pairs,
            ],
        )
        self._stale(team, epoch, reply)
        if reply[0] == "missing":
            raise NotFound(f"team {team!r}: no task {task_id!r}")
        if reply[0] == "conflict":
            check_cas(_record(team, task_id, reply[1]), expected, to, version)
            raise Conflict(f"task {task_id!r}: {to} refused")  # check_cas always raises here
        return _record(team, task_id, reply[1])

    def get_task(self, team: str, task_id: str) -> TaskRecord:
        with self._translated():
            fields = self.client.hgetall(self._task_key(team, task_id))
        if not fields:
            raise NotFound(f"team {team!r}: no task {task_id!r}")
        return _record(team, task_id, fields)

    def tasks(self, team: str) -> list[TaskRecord]:
        reply = self._run(
            "tasks", team, [self.keys.team(team, "tasks")], [self._task_key(team, "")]
        )
        rows: list[list[Any]] = json.loads(reply[1])
        found = []
        for task_id, *values in rows:
            fields = {k: v for k, v in zip(TASK_FIELDS, values, strict=True) if v is not False}
            if fields:  # else the hash was deleted behind our back
                found.append(_record(team, task_id, fields))
        return found

    def _task_key(self, team: str, task_id: str) -> str:
        return self.keys.team(team, f"task:{task_id}")

    # --- idempotency ledger -------------------------------------------------------------

    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        check_epoch("epoch", epoch)
        claim_us = micros("claim_seconds", claim_seconds)
        reply = self._run(
            "effect_begin",
            team,
            [self._effect_key(team, key)],
            [key, int(epoch), holder, claim_us, dumps({"key": key, "holder": holder})],
        )
        self._stale(team, epoch, reply)
        if reply[0] == "done":
            return EffectTicket(key, "done", json.loads(reply[1]))
        if reply[0] == "busy":
            raise EffectInProgress(f"effect {key!r} is being run by {reply[1]!r}")
        return EffectTicket(key, "run")

    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        reply = self._run(
            "effect_finish",
            team,
            [self._effect_key(team, key)],
            [key, holder, dumps(result), dumps({"key": key, "holder": holder})],
        )
        return EffectTicket(key, "done", json.loads(reply[1]))

    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        self._run(
            "effect_abort",
            team,
            [self._effect_key(team, key)],
            [key, holder, dumps({"key": key, "holder": holder})],
        )

    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        with self._translated():
            status, result = self.client.hmget(self._effect_key(team, key), "status", "result")
        if status != "done":
            return None
        return EffectTicket(key, "done", json.loads(result))

    def _effect_key(self, team: str, key: str) -> str:
        return self.keys.team(team, f"fx:{key}")


def _stored(name: str, value: Any) -> str:
    if name in _JSON_FIELDS:
        return dumps(value)
    if name == "attempt":
        if not isinstance(value, int):
            raise ProtocolError("attempt", f"a whole number, got {value!r}")
        return str(int(value))
    return "" if value is None else redact_text(str(value))


def _record(team: str, task_id: str, raw: Any) -> TaskRecord:
    """A task from its hash (a dict from HGETALL, or the flat list a script returns)."""
    fields: dict[str, str] = (
        dict(raw) if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2], strict=True))
    )
    result = fields.get("result")
    return TaskRecord(
        team=team,
        task_id=task_id,
        state=fields["state"],  # type: ignore[arg-type]
        version=int(fields["version"]),
        epoch=int(fields["epoch"]),
        attempt=int(fields["attempt"]),
        assignee=fields.get("assignee"),
        spec=json.loads(fields["spec"]),
        result=json.loads(result) if result is not None else None,
        reason=fields["reason"],
        data=json.loads(fields["data"]),
        created_at=at(fields["created"]),
        updated_at=at(fields["updated"]),
    )
