"""The message log (at-least-once, visibility timeout, dead letters) and events."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from tenure.protocol.ids import new_id
from tenure.store.base import DEFAULT_MAX_DELIVERIES, check_epoch
from tenure.store.records import Delivery, Event
from tenure.store.sqlite.core import SQLiteBase, dumps, positive


class MessagesMixin(SQLiteBase):
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        message_id = new_id()
        with self.db.write() as cur:
            now = self.now()
            cur.execute(
                "INSERT INTO messages (msg_id, team, queue, payload, sent_at, visible_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (message_id, team, queue, dumps(payload), now, now),
            )
            kind = payload.get("type") if isinstance(payload, dict) else None
            self._event(
                cur,
                team,
                "message.sent",
                {"id": message_id, "queue": queue, "type": kind},
                payload.get("epoch") if isinstance(payload.get("epoch"), int) else None,
            )
        return message_id

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
        positive("visibility_timeout", visibility_timeout)
        delivered: list[Delivery] = []
        # An empty poll takes no write lock: idle members then hold the database's
        # single writer lock only for real changes (a member paused while holding it
        # stalls every writer until it resumes or dies).
        if not self.db.read(
            "SELECT 1 FROM messages WHERE team = ? AND queue = ? AND dead = 0"
            " AND visible_at <= ? LIMIT 1",
            (team, queue, self.now()),
        ):
            return delivered
        with self.db.write() as cur:
            now = self.now()
            # Page on until the batch is full or the queue has nothing more visible, so
            # a run of dead letters never hides a deliverable message behind it.
            after = 0
            while len(delivered) < max_messages:
                rows = cur.execute(
                    "SELECT * FROM messages WHERE team = ? AND queue = ? AND dead = 0"
                    " AND visible_at <= ? AND seq > ? ORDER BY seq LIMIT ?",
                    (team, queue, now, after, (max_messages - len(delivered)) * 4),
                ).fetchall()
                if not rows:
                    break
                for row in rows:
                    if len(delivered) == max_messages:
                        break
                    after = row["seq"]
                    if row["deliveries"] >= max_deliveries:
                        self._dead_letter(cur, row, consumer)
                        continue
                    cur.execute(
                        "UPDATE messages SET deliveries = deliveries + 1, visible_at = ?"
                        " WHERE seq = ?",
                        (now + visibility_timeout, row["seq"]),
                    )
                    delivered.append(_delivery(row, row["deliveries"] + 1))
        return delivered

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        with self.db.write() as cur:
            return bool(
                cur.execute(
                    "DELETE FROM messages WHERE team = ? AND queue = ? AND msg_id = ? AND dead = 0",
                    (team, queue, message_id),
                ).rowcount
            )

    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        sql = "SELECT * FROM messages WHERE team = ? AND dead = 1"
        params: tuple[object, ...] = (team,)
        if queue is not None:
            sql, params = sql + " AND queue = ?", (team, queue)
        rows = self.db.read(sql + " ORDER BY seq", params)
        return [_delivery(row, row["deliveries"]) for row in rows]

    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        sql = "DELETE FROM messages WHERE team = ? AND dead = 1"
        params: tuple[object, ...] = (team,) if queue is None else (team, queue)
        with self.db.write() as cur:
            cur.execute(sql if queue is None else sql + " AND queue = ?", params)
            return int(cur.rowcount)

    def _dead_letter(self, cur: sqlite3.Cursor, row: sqlite3.Row, consumer: str) -> None:
        cur.execute("UPDATE messages SET dead = 1 WHERE seq = ?", (row["seq"],))
        data = {
            "id": row["msg_id"],
            "queue": row["queue"],
            "deliveries": row["deliveries"],
            "consumer": consumer,
        }
        self._event(cur, row["team"], "message.dead_lettered", data, None)

    # --- events -------------------------------------------------------------------------

    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        if epoch is not None:
            check_epoch("epoch", epoch)
        with self.db.write() as cur:
            return self._event(cur, team, kind, data, epoch)

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        if team is None:
            rows = self.db.read(
                "SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
            )
        else:
            rows = self.db.read(
                "SELECT * FROM events WHERE team = ? AND seq > ? ORDER BY seq LIMIT ?",
                (team, after, limit),
            )
        return [
            Event(r["seq"], r["team"], r["kind"], r["at"], r["epoch"], json.loads(r["data"]))
            for r in rows
        ]

    def trim_events(self, team: str, before_seq: int) -> int:
        with self.db.write() as cur:
            cur.execute("DELETE FROM events WHERE team = ? AND seq < ?", (team, before_seq))
            return int(cur.rowcount)

    def last_event_seq(self, team: str) -> int:
        rows = self.db.read("SELECT MAX(seq) FROM events WHERE team = ?", (team,))
        return int(rows[0][0] or 0)

    def teams(self) -> list[str]:
        return [row[0] for row in self.db.read("SELECT team FROM teams ORDER BY team")]


def _delivery(row: sqlite3.Row, count: int) -> Delivery:
    return Delivery(row["msg_id"], row["queue"], json.loads(row["payload"]), count, row["sent_at"])
