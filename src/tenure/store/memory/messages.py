"""The message log (at-least-once, visibility timeout, dead letters) and events in memory."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from tenure.protocol.ids import new_id
from tenure.store.base import DEFAULT_MAX_DELIVERIES, check_epoch
from tenure.store.memory.core import MemoryBase, dumps, loads, positive
from tenure.store.memory.state import EventRow, MessageRow
from tenure.store.records import Delivery, Event


class MessagesMixin(MemoryBase):
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        text = dumps(payload)
        epoch = payload.get("epoch") if isinstance(payload, dict) else None
        kind = payload.get("type") if isinstance(payload, dict) else None
        message_id = new_id()
        with self.memory.lock:
            now = self.now()
            self.memory.message_seq += 1
            row = MessageRow(self.memory.message_seq, message_id, queue, text, now, now)
            self.memory.team(team).queues.setdefault(queue, {})[message_id] = row
            self._event(
                team,
                "message.sent",
                {"id": message_id, "queue": queue, "type": kind},
                epoch if isinstance(epoch, int) else None,
                at=now,
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
        with self.memory.lock:
            now = self.now()
            state = self.memory.team(team)
            rows = state.queues.get(queue, {})
            for row in list(rows.values()):  # in send order: FIFO
                if len(delivered) >= max_messages:
                    break
                if row.visible_at > now:
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
                delivered.append(_delivery(row))
        return delivered

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        with self.memory.lock:
            rows = self.memory.team(team).queues.get(queue, {})
            return rows.pop(message_id, None) is not None

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
    return Delivery(row.message_id, row.queue, loads(row.payload), row.deliveries, row.sent_at)


def _event(row: EventRow) -> Event:
    return Event(row.seq, row.team, row.kind, row.at, row.epoch, loads(row.data))
