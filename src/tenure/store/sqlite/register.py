"""The task register and the idempotency ledger on SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from tenure.protocol.errors import Conflict, EffectInProgress, NotFound
from tenure.protocol.secrets import redact_value
from tenure.store.base import UNSET
from tenure.store.records import EffectTicket, TaskRecord, TaskState
from tenure.store.rules import check_cas, check_epoch
from tenure.store.sqlite.core import HOLDER_GONE, SQLiteBase, dumps, positive

_TASK_FIELDS = ("assignee", "attempt", "result", "reason", "data", "spec")
_JSON_FIELDS = ("result", "data", "spec")
_QUIET_FIELDS = ("data", "spec")
"""Fields whose values ``task.transition`` leaves out (a replaced spec is noted, not copied)."""


class RegisterMixin(SQLiteBase):
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
        with self.db.write() as cur:
            self._team_row(cur, team)
            self._fence(cur, team, epoch)
            now = self.now()
            try:
                cur.execute(
                    "INSERT INTO tasks VALUES (?, ?, ?, 1, ?, 0, NULL, ?, NULL, '', '{}', ?, ?,"
                    " (SELECT COUNT(*) FROM tasks WHERE team = ?))",
                    (team, task_id, state, epoch, dumps(spec), now, now, team),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"team {team!r}: task {task_id!r} already exists") from exc
            self._event(cur, team, "task.created", {"task_id": task_id, "state": state}, epoch)
            return self._task(cur, team, task_id)

    def create_tasks(
        self, team: str, tasks: Sequence[tuple[str, dict[str, Any]]], *, epoch: int
    ) -> list[TaskRecord]:
        check_epoch("epoch", epoch)
        rows = [(task_id, dumps(spec)) for task_id, spec in tasks]
        created: list[str] = []
        with self.db.write() as cur:  # one transaction: all of them or none
            self._team_row(cur, team)
            self._fence(cur, team, epoch)
            now = self.now()
            (seq,) = cur.execute("SELECT COUNT(*) FROM tasks WHERE team = ?", (team,)).fetchone()
            for task_id, spec in rows:
                cur.execute(
                    "INSERT INTO tasks VALUES (?, ?, 'queued', 1, ?, 0, NULL, ?, NULL, '', '{}',"
                    " ?, ?, ?) ON CONFLICT DO NOTHING",
                    (team, task_id, epoch, spec, now, now, seq),
                )
                if cur.rowcount:
                    seq += 1
                    created.append(task_id)
                    data = {"task_id": task_id, "state": "queued"}
                    self._event(cur, team, "task.created", data, epoch)
            return [self._task(cur, team, task_id) for task_id in created]

    def clear_tasks(self, team: str, *, epoch: int) -> int:
        check_epoch("epoch", epoch)
        with self.db.write() as cur:
            self._team_row(cur, team)
            self._fence(cur, team, epoch)
            cur.execute("DELETE FROM tasks WHERE team = ?", (team,))
            count = int(cur.rowcount)
            self._event(cur, team, "register.cleared", {"count": count}, epoch)
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
        with self.db.write() as cur:
            self._fence(cur, team, epoch)
            current = self._task(cur, team, task_id)
            check_cas(current, expected, to, version)
            changes = dict(
                zip(_TASK_FIELDS, (assignee, attempt, result, reason, data, spec), strict=True)
            )
            sets = {
                k: (dumps(v) if k in _JSON_FIELDS else redact_value(v))
                for k, v in changes.items()
                if v is not UNSET
            }
            assignments = "".join(f", {k} = ?" for k in sets)
            cur.execute(
                f"UPDATE tasks SET state = ?, version = version + 1, epoch = ?, updated_at = ?"
                f"{assignments} WHERE team = ? AND task_id = ?",
                (to, epoch, self.now(), *sets.values(), team, task_id),
            )
            event: dict[str, Any] = {
                "task_id": task_id,
                "from": current.state,
                "to": to,
                "version": current.version + 1,
            }
            event.update(
                {k: v for k, v in changes.items() if v is not UNSET and k not in _QUIET_FIELDS}
            )
            if spec is not UNSET:
                event["spec"] = True
            if data is not UNSET:
                event["data"] = True
            self._event(cur, team, "task.transition", event, epoch)
            return self._task(cur, team, task_id)

    def get_task(self, team: str, task_id: str) -> TaskRecord:
        rows = self.db.read("SELECT * FROM tasks WHERE team = ? AND task_id = ?", (team, task_id))
        if not rows:
            raise NotFound(f"team {team!r}: no task {task_id!r}")
        return _record(rows[0])

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        wanted = list(dict.fromkeys(task_ids))
        found: dict[str, TaskRecord] = {}
        for start in range(0, len(wanted), 500):  # SQLite binds a few hundred at most
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.read(
                f"SELECT * FROM tasks WHERE team = ? AND task_id IN ({marks})", (team, *chunk)
            )
            found.update((row["task_id"], _record(row)) for row in rows)
        return [found[task_id] for task_id in wanted if task_id in found]

    def tasks(self, team: str) -> list[TaskRecord]:
        rows = self.db.read("SELECT * FROM tasks WHERE team = ? ORDER BY seq", (team,))
        return [_record(row) for row in rows]

    def _task(self, cur: sqlite3.Cursor, team: str, task_id: str) -> TaskRecord:
        row = cur.execute(
            "SELECT * FROM tasks WHERE team = ? AND task_id = ?", (team, task_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"team {team!r}: no task {task_id!r}")
        return _record(row)

    # --- idempotency ledger -------------------------------------------------------------

    def effect_begin(
        self, team: str, key: str, *, epoch: int, holder: str, claim_seconds: float
    ) -> EffectTicket:
        check_epoch("epoch", epoch)
        positive("claim_seconds", claim_seconds)
        with self.db.write() as cur:
            self._fence(cur, team, epoch)
            now = self.now()
            row = cur.execute(
                "SELECT * FROM effects WHERE team = ? AND key = ?", (team, key)
            ).fetchone()
            if row is not None and row["status"] == "done":
                return EffectTicket(key, "done", json.loads(row["result"]))
            if (
                row is not None
                and row["holder"] != holder
                and row["claim_expires"] > now
                and not self._claim_gone(cur, team, key, now)
            ):
                raise EffectInProgress(key, str(row["holder"]))
            cur.execute(
                "INSERT OR REPLACE INTO effects (team, key, status, holder, claim_expires, epoch,"
                " result, updated_at, tie) VALUES (?, ?, 'running', ?, ?, ?, NULL, ?, ?)",
                (
                    team,
                    key,
                    holder,
                    now + claim_seconds,
                    epoch,
                    now,
                    self._tie(cur, team, holder, now),
                ),
            )
            self._event(cur, team, "effect.claimed", {"key": key, "holder": holder}, epoch)
            return EffectTicket(key, "run")

    def _claim_gone(self, cur: sqlite3.Cursor, team: str, key: str, now: float) -> bool:
        gone = HOLDER_GONE.format(t="effects", holder="holder")
        return bool(
            cur.execute(
                f"SELECT 1 FROM effects WHERE team = ? AND key = ? AND {gone}", (team, key, now)
            ).fetchone()
        )

    def effect_finish(self, team: str, key: str, *, holder: str, result: Any) -> EffectTicket:
        with self.db.write() as cur:
            row = cur.execute(
                "SELECT * FROM effects WHERE team = ? AND key = ?", (team, key)
            ).fetchone()
            if row is not None and row["status"] == "done":
                return EffectTicket(key, "done", json.loads(row["result"]))
            epoch = row["epoch"] if row is not None else 0
            cur.execute(
                "INSERT OR REPLACE INTO effects (team, key, status, holder, claim_expires, epoch,"
                " result, updated_at) VALUES (?, ?, 'done', ?, NULL, ?, ?, ?)",
                (team, key, holder, epoch, dumps(result), self.now()),
            )
            self._event(cur, team, "effect.done", {"key": key, "holder": holder}, epoch)
            return EffectTicket(key, "done", json.loads(dumps(result)))

    def effect_abort(self, team: str, key: str, *, holder: str) -> None:
        with self.db.write() as cur:
            gone = cur.execute(
                "DELETE FROM effects WHERE team = ? AND key = ? AND holder = ?"
                " AND status = 'running'",
                (team, key, holder),
            ).rowcount
            if gone:
                self._event(cur, team, "effect.aborted", {"key": key, "holder": holder}, None)

    def effect_lookup(self, team: str, key: str) -> EffectTicket | None:
        rows = self.db.read(
            "SELECT result FROM effects WHERE team = ? AND key = ? AND status = 'done'", (team, key)
        )
        return EffectTicket(key, "done", json.loads(rows[0][0])) if rows else None


def _record(row: sqlite3.Row) -> TaskRecord:
    return TaskRecord(
        team=row["team"],
        task_id=row["task_id"],
        state=row["state"],
        version=row["version"],
        epoch=row["epoch"],
        attempt=row["attempt"],
        assignee=row["assignee"],
        spec=json.loads(row["spec"]),
        result=json.loads(row["result"]) if row["result"] is not None else None,
        reason=row["reason"],
        data=json.loads(row["data"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
