"""The message log (at-least-once, visibility timeout, dead letters) and events."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from tenure.protocol.ids import new_id
from tenure.store.base import DEFAULT_MAX_DELIVERIES
from tenure.store.payload import check_event_data, payload_text, read_event_data, read_payload
from tenure.store.records import Delivery, Event
from tenure.store.rules import check_epoch, check_wait
from tenure.store.sqlite.core import HOLDER_GONE, SQLiteBase, dumps, positive

RECHECK = 0.05
"""Seconds a waiting receive goes without looking at the queue itself when nothing
was written: how late it may notice a message whose visibility timeout ran out."""


class MessagesMixin(SQLiteBase):
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        return self.send_many(team, queue, [payload])[0]

    def send_many(self, team: str, queue: str, payloads: Sequence[dict[str, Any]]) -> list[str]:
        texts = [payload_text(payload, dumps) for payload in payloads]  # all checked first
        ids = [new_id() for _ in payloads]
        if not ids:
            return ids
        with self.db.write() as cur:  # one transaction: every message or none
            now = self.now()
            for message_id, text, payload in zip(ids, texts, payloads, strict=True):
                cur.execute(
                    "INSERT INTO messages (msg_id, team, queue, payload, sent_at, visible_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (message_id, team, queue, text, now, now),
                )
                epoch = payload.get("epoch")
                self._event(
                    cur,
                    team,
                    "message.sent",
                    {"id": message_id, "queue": queue, "type": payload.get("type")},
                    epoch if isinstance(epoch, int) else None,
                )
        return ids

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
        positive("visibility_timeout", visibility_timeout)
        deadline = time.monotonic() + check_wait(wait)
        while True:
            # read before the look, so a change after it is not missed (no wait: no read)
            seen = self.db.version() if deadline > time.monotonic() else None
            delivered = self._receive_now(
                team, queue, consumer, visibility_timeout, max_messages, max_deliveries
            )
            remaining = deadline - time.monotonic()
            if delivered or remaining <= 0 or seen is None:
                return delivered
            # nothing changed in the file: only the clock (a visibility timeout, a
            # consumer's heartbeat running out) can make a message deliverable, and
            # that is looked at again every RECHECK
            self.db.wait_change(seen, min(remaining, RECHECK))

    def _receive_now(
        self,
        team: str,
        queue: str,
        consumer: str,
        visibility_timeout: float,
        max_messages: int,
        max_deliveries: int,
    ) -> list[Delivery]:
        delivered: list[Delivery] = []
        # An empty poll takes no write lock: idle members then hold the database's
        # single writer lock only for real changes (a member paused while holding it
        # stalls every writer until it resumes or dies).
        now = self.now()
        if not self.db.read(
            f"SELECT 1 FROM messages WHERE team = ? AND queue = ? AND dead = 0 AND {_VISIBLE}"
            " LIMIT 1",
            (team, queue, now, now),
        ):
            return delivered
        with self.db.write() as cur:
            now = self.now()
            tie = self._tie(cur, team, consumer, now)
            # Page on until the batch is full or the queue has nothing more visible, so
            # a run of dead letters never hides a deliverable message behind it.
            after = 0
            while len(delivered) < max_messages:
                rows = cur.execute(
                    f"SELECT * FROM messages WHERE team = ? AND queue = ? AND dead = 0"
                    f" AND {_VISIBLE} AND seq > ? ORDER BY seq LIMIT ?",
                    (team, queue, now, now, after, (max_messages - len(delivered)) * 4),
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
                        "UPDATE messages SET deliveries = deliveries + 1, visible_at = ?,"
                        " consumer = ?, tie = ? WHERE seq = ?",
                        (now + visibility_timeout, consumer, tie, row["seq"]),
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

    def release(self, team: str, queue: str, message_id: str) -> bool:
        with self.db.write() as cur:
            return bool(
                cur.execute(
                    "UPDATE messages SET visible_at = ? WHERE team = ? AND queue = ?"
                    " AND msg_id = ? AND dead = 0 AND deliveries > 0",
                    (self.now(), team, queue, message_id),
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
        check_event_data(data)
        with self.db.write() as cur:
            return self._event(cur, team, kind, data, epoch)

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        if limit <= 0:  # as every backend: SQLite would read LIMIT -1 as no limit at all
            return []
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
            Event(r["seq"], r["team"], r["kind"], r["at"], r["epoch"], read_event_data(r["data"]))
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


_VISIBLE = "(visible_at <= ? OR " + HOLDER_GONE.format(t="messages", holder="consumer") + ")"
"""A message is deliverable once its visibility passed or its consumer's incarnation
is gone (bind: now, now)."""


def _delivery(row: sqlite3.Row, count: int) -> Delivery:
    """Built after the delivery was counted; decoding never raises (``read_payload``)."""
    payload, problem = read_payload(row["payload"])
    return Delivery(row["msg_id"], row["queue"], payload, count, row["sent_at"], problem)
