"""The message log on Redis Streams (one consumer group per queue) and the events."""

from __future__ import annotations

import heapq
import json
import math
import re
import time
from collections.abc import Sequence
from typing import Any

from tenure.store.base import DEFAULT_MAX_DELIVERIES
from tenure.store.payload import check_event_data, payload_text, read_event_data, read_payload
from tenure.store.records import Delivery, Event
from tenure.store.redis.core import RedisBase, at, dumps, micros
from tenure.store.rules import check_epoch, check_wait
from tenure.store.writes import Ack

_STREAM_ID = re.compile(r"[0-9]{1,19}-[0-9]{1,19}")
RECHECK = 0.25
"""The longest one block of a waiting receive: a consumer whose heartbeat ran out
frees what it held without a write to the stream, so it is looked for this often."""


class MessagesMixin(RedisBase):
    def send(self, team: str, queue: str, payload: dict[str, Any]) -> str:
        return self.send_many(team, queue, [payload])[0]

    def send_many(self, team: str, queue: str, payloads: Sequence[dict[str, Any]]) -> list[str]:
        """One script for the whole batch: atomic, and one round trip."""
        args: list[Any] = [len(payloads)]
        for payload in payloads:  # every payload checked before anything is sent
            epoch = payload.get("epoch") if isinstance(payload, dict) else None
            args += [
                payload_text(payload, dumps),
                int(epoch) if isinstance(epoch, int) else "",
                dumps({"queue": queue, "type": payload.get("type")}),
            ]
        if not payloads:
            return []
        reply = self._run("send_many", team, [self.keys.queue(team, queue)], args)
        return [str(message_id) for message_id in reply[1:]]

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
        visibility_us = micros("visibility_timeout", visibility_timeout)
        deadline = time.monotonic() + check_wait(wait)
        if max_messages <= 0:
            return []
        keys = [
            self.keys.queue(team, queue),
            self.keys.team(team, f"qv:{queue}"),
            self.keys.team(team, "dead"),
            self.keys.team(team, f"qh:{queue}"),
            *self._liveness_keys(team),
        ]
        args = [queue, consumer, visibility_us, int(max_messages), int(max_deliveries)]
        while True:
            waits = deadline > time.monotonic()
            reply = self._run("receive", team, keys, [*args, "1" if waits else ""])
            if reply[0] != "wait":
                return _deliveries(queue, reply)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._wait_for_entry(keys[0], reply, remaining)

    def _wait_for_entry(self, stream: str, reply: list[Any], remaining: float) -> None:
        """Block (``XREAD BLOCK``, which takes nothing) until the queue's stream gets an
        entry past its last one, or the next visibility deadline, or ``remaining``
        seconds; never longer than ``RECHECK`` (a consumer whose heartbeat runs out
        frees what it held without writing to the stream)."""
        seconds = min(remaining, RECHECK, self._block_limit())
        if reply[3] != "":
            seconds = min(seconds, (int(reply[3]) - int(reply[1])) / 1_000_000)
        block_ms = max(1, math.ceil(seconds * 1000))
        with self._translated():
            self.client.xread({stream: str(reply[2])}, count=1, block=block_ms)

    def _block_limit(self) -> float:
        """Half the client's socket timeout: a block must end well before a read of the
        reply would be taken for a server that stopped answering."""
        timeout = self.client.connection_pool.connection_kwargs.get("socket_timeout")
        return float(timeout) / 2 if timeout else RECHECK

    def ack(self, team: str, queue: str, message_id: str) -> bool:
        if not isinstance(message_id, str) or not _STREAM_ID.fullmatch(message_id):
            return False  # not an id this store hands out
        acked: bool = self.commit(team, [Ack(queue, message_id)])[0]
        return acked

    def release(self, team: str, queue: str, message_id: str) -> bool:
        if not isinstance(message_id, str) or not _STREAM_ID.fullmatch(message_id):
            return False
        with self._translated():  # visible again from time 0: at once, on the store's clock
            changed = self.client.zadd(
                self.keys.team(team, f"qv:{queue}"), {message_id: 0}, xx=True, ch=True
            )
        return bool(changed)

    def dead_letters(self, team: str, queue: str | None = None) -> list[Delivery]:
        with self._translated():
            entries = self.client.xrange(self.keys.team(team, "dead"))
        found = []
        for _entry_id, fields in entries:
            if queue is not None and fields.get("q") != queue:
                continue
            payload, problem = read_payload(fields.get("p"))
            found.append(
                Delivery(
                    str(fields["id"]),
                    str(fields["q"]),
                    payload,
                    int(fields["n"]),
                    at(fields["s"]),
                    problem,
                )
            )
        return found

    def drop_dead_letters(self, team: str, queue: str | None = None) -> int:
        key = self.keys.team(team, "dead")
        with self._translated():
            entries = self.client.xrange(key)
            ids = [i for i, fields in entries if queue is None or fields.get("q") == queue]
            return int(self.client.xdel(key, *ids)) if ids else 0

    # --- events -------------------------------------------------------------------------

    def append_event(
        self, team: str, kind: str, data: dict[str, Any], *, epoch: int | None = None
    ) -> int:
        if epoch is not None:
            check_epoch("epoch", epoch)
        check_event_data(data)
        reply = self._run(
            "append_event", team, [], [kind, "" if epoch is None else int(epoch), dumps(data)]
        )
        return int(reply[1])

    def events(self, team: str | None = None, *, after: int = 0, limit: int = 1000) -> list[Event]:
        if limit <= 0:
            return []
        if team is None:
            return self._all_events(after, limit)
        return self._team_events(team, after, limit)

    def _team_events(self, team: str, after: int, limit: int) -> list[Event]:
        start = f"{after + 1}-0" if after >= 0 else "-"
        key = self.keys.team(team, "events")
        reply = self._run("events", team, [key], [start, int(limit)])
        return [_event(row[0], row[1::2], row[2::2]) for row in json.loads(reply[1])]

    def _all_events(self, after: int, limit: int) -> list[Event]:
        """Every team's stream read from ``after`` and merged by seq (each event is
        written once, to its team's stream: the store-wide order is the seq's)."""
        pages = [self._team_events(team, after, limit) for team in self.teams()]
        return list(heapq.merge(*pages, key=lambda event: event.seq))[:limit]

    def trim_events(self, team: str, before_seq: int) -> int:
        """``XTRIM MINID``: every entry of the team's stream below the seq, exactly."""
        key = self.keys.team(team, "events")
        with self._translated():
            return int(self.client.xtrim(key, minid=f"{max(1, before_seq)}-0", approximate=False))

    def last_event_seq(self, team: str) -> int:
        with self._translated():
            newest = self.client.xrevrange(self.keys.team(team, "events"), count=1)
        return int(str(newest[0][0]).split("-", 1)[0]) if newest else 0

    def teams(self) -> list[str]:
        with self._translated():
            names = self.client.smembers(self.keys.teams)
        return sorted(str(name) for name in names)


def _deliveries(queue: str, reply: list[Any]) -> list[Delivery]:
    """The deliveries a receive script counted; decoding comes after, and never raises."""
    found = []
    for i in range(1, len(reply), 4):
        payload, problem = read_payload(reply[i + 1])
        found.append(
            Delivery(str(reply[i]), queue, payload, int(reply[i + 2]), at(reply[i + 3]), problem)
        )
    return found


def _event(entry_id: str, names: list[str], values: list[str]) -> Event:
    fields = dict(zip(names, values, strict=True))
    epoch = fields.get("epoch")
    return Event(
        seq=int(entry_id.split("-", 1)[0]),
        team=fields["team"],
        kind=fields["kind"],
        at=at(fields["at"]),
        epoch=int(epoch) if epoch is not None else None,
        data=read_event_data(fields.get("data")),
    )
