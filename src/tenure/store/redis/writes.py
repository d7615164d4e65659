"""Several writes in one script on Redis: ``commit`` and ``begin_attempt``.

Also what every single write of the register, the ledger and the queues becomes
(``transition``, ``effect_finish``, ``ack`` are commits of one write), and how a
task hash is read back into a ``TaskRecord``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tenure.protocol.errors import Conflict, NotFound, ProtocolError, StaleEpoch
from tenure.protocol.secrets import redact_text
from tenure.store.base import UNSET
from tenure.store.payload import check_event_data, payload_text
from tenure.store.records import EffectTicket, TaskRecord
from tenure.store.redis.core import RedisBase, at, dumps, micros
from tenure.store.rules import check_epoch, check_expected, check_move
from tenure.store.writes import Ack, AttemptStart, Expect, Move, Note, Record, Write

NULLABLE = ("assignee", "result")
JSON_FIELDS = ("result", "data", "spec")
QUIET_FIELDS = ("data", "spec")
"""Fields whose values ``task.transition`` leaves out (a replaced spec is noted, not copied)."""


class WritesMixin(RedisBase):
    def commit(self, team: str, writes: Sequence[Write]) -> list[Any]:
        if not writes:
            return []
        keys: list[str] = []
        ops = [self._op(team, write, keys) for write in writes]
        reply = self._run("commit", team, keys, [json.dumps(ops, separators=(",", ":"))])
        if reply[0] != "ok":
            self._refused(team, writes, reply)
        return [_answer(team, write, value) for write, value in zip(writes, reply[1:], strict=True)]

    def _op(self, team: str, write: Write, keys: list[str]) -> dict[str, Any]:
        """One write as the script takes it; ``keys`` gets the keys it names (KEYS
        indexes count the five common keys first)."""
        first = 6 + len(keys)
        if isinstance(write, Move):
            keys.append(self.keys.task(team, write.task_id))
            return {"op": "move", "k": first, **_move_fields(write)}
        if isinstance(write, Expect):
            keys.append(self.keys.task(team, write.task_id))
            return {"op": "expect", "k": first, "version": int(write.version)}
        if isinstance(write, Note):
            check_event_data(write.data)
            return {
                "op": "note",
                "kind": write.kind,
                "epoch": _epoch(write.epoch),
                "data": dumps(write.data),
            }
        if isinstance(write, Record):
            keys.append(self.keys.effect(team, write.key))
            event = dumps({"key": write.key, "holder": write.holder})
            return {
                "op": "record",
                "k": first,
                "holder": write.holder,
                "result": dumps(write.result),
                "event": event,
            }
        if isinstance(write, Ack):
            keys.extend(self.keys.queue_keys(team, write.queue))
            return {"op": "ack", "k": first, "id": str(write.message_id)}
        payload = payload_text(write.payload, dumps)  # refused before anything is named
        keys.append(self.keys.queue(team, write.queue))
        epoch = write.payload.get("epoch")
        return {
            "op": "send",
            "k": first,
            "payload": payload,
            "epoch": _epoch(epoch if isinstance(epoch, int) else None),
            "event": dumps({"queue": write.queue, "type": write.payload.get("type")}),
        }

    def _refused(self, team: str, writes: Sequence[Write], reply: list[Any]) -> None:
        write = writes[int(reply[1]) - 1]
        assert isinstance(write, Move | Expect)  # only these are checked
        if reply[0] == "missing":
            raise NotFound(f"team {team!r}: no task {write.task_id!r}")
        if isinstance(write, Expect):
            check_expected(write, int(reply[3]))
        elif reply[0] == "stale":
            raise StaleEpoch(team, write.epoch, int(reply[2]))
        else:
            check_move(write.task_id, reply[2], int(reply[3]), write)
        raise Conflict(f"task {write.task_id!r}: refused")  # the checks above raised

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
        check_epoch("epoch", epoch)
        claim_us = micros("claim_seconds", claim_seconds)
        event: dict[str, Any] = {"task_id": task_id, "to": "running"}
        if take:
            event["assignee"] = holder
        if data is not UNSET:
            event["data"] = True
        reply = self._run(
            "begin_attempt",
            team,
            [
                self.keys.effect(team, key),
                self.keys.task(team, task_id),
                *self._liveness_keys(team),
            ],
            [
                key,
                int(epoch),
                holder,
                claim_us,
                int(attempt),
                "1" if take else "",
                "" if data is UNSET else dumps(data),
                dumps({"key": key, "holder": holder}),
                dumps(event),
            ],
        )
        outcome, now = reply[0], at(reply[1])
        if outcome == "replayed":
            return AttemptStart("replayed", now, result=json.loads(reply[2]))
        if outcome == "outdated":
            task = task_record(team, task_id, reply[2]) if len(reply) > 2 else None
            return AttemptStart("outdated", now, task=task)
        if outcome == "fenced":
            return AttemptStart("fenced", now, current=int(reply[2]))
        if outcome == "in_progress":
            return AttemptStart("in_progress", now, holder=str(reply[2]))
        return AttemptStart("run", now, task=task_record(team, task_id, reply[2]))


def _move_fields(move: Move) -> dict[str, Any]:
    """A move's fence, compare-and-set, the fields it sets and drops, and its event."""
    check_epoch("epoch", move.epoch)
    given = dict(move.changes)
    drop = [k for k in NULLABLE if k in given and given[k] is None]
    sets: list[str] = []
    for name, value in given.items():
        if name not in drop:
            sets += [name, stored(name, value)]
    event: dict[str, Any] = {"task_id": move.task_id, "to": move.to}
    event.update({k: v for k, v in given.items() if k not in QUIET_FIELDS})
    if "spec" in given:
        event["spec"] = True
    if "data" in given:
        event["data"] = True
    return {
        "epoch": int(move.epoch),
        "expect": sorted(set(move.expect)),
        "to": move.to,
        "version": -1 if move.version is None else int(move.version),
        "sets": sets,
        "drop": drop,
        "event": dumps(event),
    }


def _answer(team: str, write: Write, value: Any) -> Any:
    """A write's answer as its single call gives it."""
    if isinstance(write, Move):
        return task_record(team, write.task_id, value)
    if isinstance(write, Expect):
        return None
    if isinstance(write, Note):
        return int(value)
    if isinstance(write, Record):
        return EffectTicket(write.key, "done", json.loads(value))
    if isinstance(write, Ack):
        return bool(value)
    return str(value)


def _epoch(epoch: int | None) -> int:
    if epoch is None:
        return -1
    return check_epoch("epoch", epoch)


def stored(name: str, value: Any) -> str:
    """A task field's value as its hash keeps it."""
    if name in JSON_FIELDS:
        return dumps(value)
    if name == "attempt":
        if not isinstance(value, int):
            raise ProtocolError("attempt", f"a whole number, got {value!r}")
        return str(int(value))
    return "" if value is None else redact_text(str(value))


def task_record(team: str, task_id: str, raw: Any) -> TaskRecord:
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
