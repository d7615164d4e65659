"""The message log on Redis Streams (one consumer group per queue) and the events."""

from __future__ import annotations

import json
import re
from typing import Any

from tenure.store.base import DEFAULT_MAX_DELIVERIES, check_epoch
from tenure.store.records import Delivery, Event
from tenure.store.redis.core import RedisBase, at, dumps, micros

_STREAM_ID = re.compile(r"[0-9]{1,19}-[0-9]{1,19}")


class MessagesMixin(RedisBase):
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        epoch = payload.get("epoch") if isinstance(payload, dict) else None
        kind = payload.get("type") if isinstance(payload, dict) else None
        reply = self._run(
            "send",
            team,
            [self._queue_key(team, queue)],
            [
                dumps(payload),
                int(epoch) if isinstance(epoch, int) else "",
                dumps({"queue": queue, "type": kind}),
            ],
        )
        return str(reply[1])

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
        visibility_us = micros("visibility_timeout", visibility_timeout)
        if max_messages <= 0:
            return []
        reply = self._run(
            "receive",
            team,
            [
                self._queue_key(team, queue),
                self.keys.team(team, f"qv:{queue}"),
                self.keys.team(team, "dead"),
            ],
            [queue, consumer, visibility_us, int(max_messages), int(max_deliveries)],
        )
        return [
            Delivery(
                str(reply[i]), queue, json.loads(reply[i + 1]), int(reply[i + 2]), at(reply[i + 3])
            )
            for i in range(1, len(reply), 4)
        ]

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        if not isinstance(message_id, str) or not _STREAM_ID.fullmatch(message_id):
            return False  # not an id this store hands out
        reply = self._run(
            "ack",
            team,
            [self._queue_key(team, queue), self.keys.team(team, f"qv:{queue}")],
            [message_id],
        )
        return bool(reply[0] == "ok")

    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        with self._translated():
            entries = self.client.xrange(self.keys.team(team, "dead"))
        found = []
        for _entry_id, fields in entries:
            if queue is not None and fields.get("q") != queue:
                continue
            found.append(
                Delivery(
                    str(fields["id"]),
                    str(fields["q"]),
                    json.loads(fields["p"]),
                    int(fields["n"]),
                    at(fields["s"]),
                )
            )
        return found

    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        key = self.keys.team(team, "dead")
        with self._translated():
            entries = self.client.xrange(key)
            ids = [i for i, fields in entries if queue is None or fields.get("q") == queue]
            return int(self.client.xdel(key, *ids)) if ids else 0

    def _queue_key(self, team: str, queue: str) -> str:
        return self.keys.team(team, f"q:{queue}")

    # --- events -------------------------------------------------------------------------

    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        if epoch is not None:
            check_epoch("epoch", epoch)
        reply = self._run(
            "append_event", team, [], [kind, "" if epoch is None else int(epoch), dumps(data)]
        )
        return int(reply[1])

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        if limit <= 0:
            return []
        key = self.keys.events if team is None else self.keys.team(team, "events")
        start = f"{after + 1}-0" if after >= 0 else "-"
        reply = self._run("events", team or "", [key], [start, int(limit)])
        return [_event(row[0], row[1::2], row[2::2]) for row in json.loads(reply[1])]

    def trim_events(self, team: str, before_seq: int) -> int:
        """XTRIM the team's stream; the same entries (same ids) leave the store-wide
        stream one page at a time, so nothing else's events are touched."""
        key = self.keys.team(team, "events")
        end = f"({max(1, before_seq)}-0"
        removed = 0
        with self._translated():
            while True:
                page = self.client.xrange(key, "-", end, count=1000)
                if not page:
                    return removed
                ids = [entry_id for entry_id, _ in page]
                pipe = self.client.pipeline(transaction=True)
                pipe.xdel(self.keys.events, *ids)
                pipe.xdel(key, *ids)
                removed += int(pipe.execute()[1])

    def last_event_seq(self, team: str) -> int:
        with self._translated():
            newest = self.client.xrevrange(self.keys.team(team, "events"), count=1)
        return int(str(newest[0][0]).split("-", 1)[0]) if newest else 0

    def teams(self) -> list[str]:
        with self._translated():
            names = self.client.smembers(self.keys.teams)
        return sorted(str(name) for name in names)


def _event(entry_id: str, names: list[str], values: list[str]) -> Event:
    fields = dict(zip(names, values, strict=True))
    epoch = fields.get("epoch")
    return Event(
        seq=int(entry_id.split("-", 1)[0]),
        team=fields["team"],
        kind=fields["kind"],
        at=at(fields["at"]),
        epoch=int(epoch) if epoch is not None else None,
        data=json.loads(fields["data"]),
    )
