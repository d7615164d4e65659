"""The task register and the idempotency ledger on Redis (one hash per task / key)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tenure.protocol.errors import Conflict, EffectInProgress, NotFound
from tenure.store.base import UNSET
from tenure.store.records import EffectTicket, TaskRecord, TaskState
from tenure.store.redis.core import RedisBase, at, dumps, micros
from tenure.store.redis.scripts import TASK_FIELDS
from tenure.store.redis.writes import task_record
from tenure.store.rules import check_epoch
from tenure.store.writes import Move, Record


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
            [self.keys.task(team, task_id), self.keys.team(team, "tasks")],
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

    def create_tasks(
        self, team: str, tasks: Sequence[tuple[str, dict[str, Any]]], *, epoch: int
    ) -> list[TaskRecord]:
        check_epoch("epoch", epoch)
        specs = {task_id: dumps(spec) for task_id, spec in reversed(tasks)}  # first one wins
        if not tasks:
            return []
        keys = [self.keys.team(team, "tasks")] + [self.keys.task(team, t) for t, _ in tasks]
        args: list[Any] = [int(epoch)]
        for task_id, _ in tasks:
            args += [task_id, specs[task_id]]
        reply = self._run("create_tasks", team, keys, args)
        self._stale(team, epoch, reply)
        now = at(reply[1])
        return [
            TaskRecord(
                team=team,
                task_id=str(task_id),
                state="queued",
                version=1,
                epoch=int(epoch),
                attempt=0,
                assignee=None,
                spec=json.loads(specs[str(task_id)]),
                result=None,
                reason="",
                data={},
                created_at=now,
                updated_at=now,
            )
            for task_id in reply[2:]
        ]

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
        changes = {
            "assignee": assignee,
            "attempt": attempt,
            "result": result,
            "reason": reason,
            "data": data,
            "spec": spec,
        }
        given = {k: v for k, v in changes.items() if v is not UNSET}
        move = Move(task_id, epoch, tuple(expect), to, version, given)
        record: TaskRecord = self.commit(team, [move])[0]
        return record

    def get_task(self, team: str, task_id: str) -> TaskRecord:
        with self._translated():
            fields = self.client.hgetall(self.keys.task(team, task_id))
        if not fields:
            raise NotFound(f"team {team!r}: no task {task_id!r}")
        return task_record(team, task_id, fields)

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        wanted = list(dict.fromkeys(task_ids))
        with self._translated():
            pipe = self.client.pipeline(transaction=False)
            for task_id in wanted:
                pipe.hgetall(self.keys.task(team, task_id))
            replies = pipe.execute()
        return [
            task_record(team, task_id, fields)
            for task_id, fields in zip(wanted, replies, strict=True)
            if fields
        ]

    def tasks(self, team: str) -> list[TaskRecord]:
        reply = self._run(
            "tasks", team, [self.keys.team(team, "tasks")], [self.keys.task(team, "")]
        )
        rows: list[list[Any]] = json.loads(reply[1])
        found = []
        for task_id, *values in rows:
            fields = {k: v for k, v in zip(TASK_FIELDS, values, strict=True) if v is not False}
            if fields:  # else the hash was deleted behind our back
                found.append(task_record(team, task_id, fields))
        return found

    def clear_tasks(self, team: str, *, epoch: int) -> int:
        check_epoch("epoch", epoch)
        reply = self._run(
            "clear_tasks",
            team,
            [self.keys.team(team, "tasks")],
            [int(epoch), self.keys.task(team, "")],
        )
        self._stale(team, epoch, reply)
        return int(reply[1])

    # --- idempotency ledger -------------------------------------------------------------

    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        check_epoch("epoch", epoch)
        claim_us = micros("claim_seconds", claim_seconds)
        reply = self._run(
            "effect_begin",
            team,
            [self.keys.effect(team, key), *self._liveness_keys(team)],
            [key, int(epoch), holder, claim_us, dumps({"key": key, "holder": holder})],
        )
        self._stale(team, epoch, reply)
        if reply[0] == "done":
            return EffectTicket(key, "done", json.loads(reply[1]))
        if reply[0] == "busy":
            raise EffectInProgress(key, str(reply[1]))
        return EffectTicket(key, "run")

    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        ticket: EffectTicket = self.commit(team, [Record(key, holder, result)])[0]
        return ticket

    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        self._run(
            "effect_abort",
            team,
            [self.keys.effect(team, key)],
            [key, holder, dumps({"key": key, "holder": holder})],
        )

    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        with self._translated():
            status, result = self.client.hmget(self.keys.effect(team, key), "status", "result")
        if status != "done":
            return None
        return EffectTicket(key, "done", json.loads(result))
