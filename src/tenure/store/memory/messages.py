"""The message log (at-least-once, visibility timeout, dead letters) and events in memory."""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from tenure.protocol.ids import new_id
from tenure.store.base import DEFAULT_MAX_DELIVERIES
from tenure.store.memory.core import MemoryBase, dumps, positive
from tenure.store.memory.state import EventRow, MessageRow
from tenure.store.payload import check_event_data, payload_text, read_event_data, read_payload
from tenure.store.records import Delivery, Event
from tenure.store.rules import check_epoch, check_wait

RECHECK = 0.05
"""Seconds a waiting receive goes without looking when nothing was sent: how late it
may notice a message whose visibility timeout ran out."""


class MessagesMixin(MemoryBase):
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        return self.send_many(team, queue, [payload])[0]

    def send_many(self, team: str, queue: str, payloads: Sequence[dict[str, Any]]) -> list[str]:
        texts = [payload_text(payload, dumps) for payload in payloads]  # all checked first
        ids = [new_id() for _ in payloads]
        if not ids:
            return ids
        with self.memory.lock:
            now = self.now()
            rows = self.memory.team(team).queues.setdefault(queue, {})
            for message_id, text, payload in zip(ids, texts, payloads, strict=True):
                self.memory.message_seq += 1
                rows[message_id] = MessageRow(
                    self.memory.message_seq, message_id, queue, text, now, now
                )
                epoch = payload.get("epoch")
                self._event(
                    team,
                    "message.sent",
                    {"id": message_id, "queue": queue, "type": payload.get("type")},
                    epoch if isinstance(epoch, int) else None,
                    at=now,
                )
            self.memory.sent.notify_all()
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
        with self.memory.lock:
            while True:
                delivered = self._receive_now(
                    team, queue, consumer, visibility_timeout, max_messages, max_deliveries
                )
                remaining = deadline - time.monotonic()
                if delivered or remaining <= 0:
                    return delivered
                # woken by a send or a give-back; the clock (visibility timeouts, a
                # consumer's heartbeat running out) is looked at every RECHECK
                self.memory.sent.wait(min(remaining, RECHECK))

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
        with self.memory.lock:
            now = self.now()
            state = self.memory.team(team)
            rows = state.queues.get(queue, {})
            for row in list(rows.values()):  # in send order: FIFO
                if len(delivered) >= max_messages:
                    break
                if row.visible_at > now and not self._holder_gone(team, row.consumer, row.tie, now):
                    continue
                if row.deliveries >= max_deliveries:
                    del rows[row.message_id]
                    state.dead[row.message_id] = row
                    data = {
                        "id": row.message_id,
                        "queue": queue,
                        "deliveries": row.deliveries,
                        "consumer": consumer,
                    }
                    self._event(team, "message.dead_lettered", data, None, at=now)
                    continue
                row.deliveries += 1
                row.visible_at = now + visibility_timeout
                row.consumer, row.tie = consumer, self._tie(team, consumer, now)
                delivered.append(_delivery(row))
        return delivered

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        with self.memory.lock:
            rows = self.memory.team(team).queues.get(queue, {})
            return rows.pop(message_id, None) is not None

    def release(self, team: str, queue: str, message_id: str) -> bool:
        with self.memory.lock:
            row = self.memory.team(team).queues.get(queue, {}).get(message_id)
            if row is None or not row.deliveries:
                return False
            row.visible_at = self.now()
            self.memory.sent.notify_all()
            return True

    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        with self.memory.lock:
            dead = self.memory.team(team).dead.values()
            found = [row for row in dead if queue is None or row.queue == queue]
            return [_delivery(row) for row in sorted(found, key=lambda row: row.seq)]

    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        with self.memory.lock:
            dead = self.memory.team(team).dead
            gone = [i for i, row in dead.items() if queue is None or row.queue == queue]
            for message_id in gone:
                del dead[message_id]
            return len(gone)

    # --- events -------------------------------------------------------------------------

    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        if epoch is not None:
            check_epoch("epoch", epoch)
        check_event_data(data)
        with self.memory.lock:
            return self._event(team, kind, data, epoch, at=self.now())

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        if limit <= 0:
            return []
        with self.memory.lock:
            log = self.memory.events if team is None else self.memory.team(team).events
            start = bisect_right(log, after, key=lambda row: row.seq)
            page = log[start : start + limit]
        return [_event(row) for row in page]

    def trim_events(self, team: str, before_seq: int) -> int:
        with self.memory.lock:
            memory = self.memory
            state = memory.team(team)
            cut = bisect_right(state.events, before_seq - 1, key=lambda row: row.seq)
            if not cut:
                return 0
            gone = {row.seq for row in state.events[:cut]}
            del state.events[:cut]
            memory.events = [row for row in memory.events if row.seq not in gone]
            return len(gone)

    def last_event_seq(self, team: str) -> int:
        with self.memory.lock:
            log = self.memory.team(team).events
            return log[-1].seq if log else 0

    def teams(self) -> list[str]:
        with self.memory.lock:
            return sorted(name for name, state in self.memory.teams.items() if state.known)


def _delivery(row: MessageRow) -> Delivery:
    payload, problem = read_payload(row.payload)
    return Delivery(row.message_id, row.queue, payload, row.deliveries, row.sent_at, problem)


def _event(row: EventRow) -> Event:
    return Event(row.seq, row.team, row.kind, row.at, row.epoch, read_event_data(row.data))
