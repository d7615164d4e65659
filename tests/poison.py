"""Writing a raw payload straight into a store's queue, past ``send`` and its checks:
what another program (an older version, a hand-made script, an attacker with the
store's password) could leave there. For the tests that show no member chokes on it.

Run as a program (``python tests/poison.py URL TEAM QUEUE KIND``) it writes one of the
``POISONS`` and prints the message id.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from dataclasses import replace

from tenure.protocol.ids import new_id
from tenure.store import Store, open_store
from tenure.store.memory.backend import MemoryStore
from tenure.store.sqlite import SQLiteStore

POISONS: dict[str, str] = {
    "deep": "[" * 100_000 + "]" * 100_000,  # a RecursionError in json.loads
    "deep-object": '{"a":' * 960 + "1" + "}" * 960,  # decodes, deeper than any limit
    "garbage": "\x00\xff not json at all {{{",
    "huge": '{"type":"task.result","pad":"' + "x" * (2 * 1024 * 1024) + '"}',
    "list": "[1, 2, 3]",
}


def inject(store: Store, team: str, queue: str, raw: str) -> str:
    """Append ``raw`` as the payload of a new message of ``queue``; returns its id."""
    if isinstance(store, SQLiteStore):
        return _sqlite(store, team, queue, raw)
    if isinstance(store, MemoryStore):
        return _memory(store, team, queue, raw)
    return _redis(store, team, queue, raw)


def _sqlite(store: SQLiteStore, team: str, queue: str, raw: str) -> str:
    message_id = new_id()
    conn = sqlite3.connect(store.path, timeout=30)
    try:
        with conn:
            conn.execute(
                "INSERT INTO messages (msg_id, team, queue, payload, sent_at, visible_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (message_id, team, queue, raw, time.time(), time.time()),
            )
    finally:
        conn.close()
    return message_id


def _redis(store: Store, team: str, queue: str, raw: str) -> str:
    from tenure.store.redis.backend import RedisStore

    assert isinstance(store, RedisStore)
    # a real send first makes the stream and its consumer group; its id N-0 is the
    # newest, so N-1 comes after it in the stream
    first = store.send(team, queue, {"seed": True})
    store.ack(team, queue, first)
    client, keys = store.client, store.keys
    message_id = first.split("-", 1)[0] + "-1"
    stamp = str(int(time.time() * 1_000_000))
    client.xadd(keys.team(team, f"q:{queue}"), {"p": raw, "s": stamp}, id=message_id)
    return message_id


def _memory(store: MemoryStore, team: str, queue: str, raw: str) -> str:
    message_id = store.send(team, queue, {"seed": True})
    memory = store.memory
    with memory.lock:
        memory.team(team).queues[queue][message_id].payload = raw
    return message_id


def inject_event(store: Store, team: str, raw: str) -> None:
    """Append an event whose stored data is ``raw``, past ``append_event``."""
    seq = store.append_event(team, "seed", {})
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path, timeout=30)
        try:
            with conn:
                conn.execute("UPDATE events SET data = ? WHERE seq = ?", (raw, seq))
        finally:
            conn.close()
    elif isinstance(store, MemoryStore):
        with store.memory.lock:
            row = next(r for r in store.memory.team(team).events if r.seq == seq)
            index = store.memory.team(team).events.index(row)
            store.memory.team(team).events[index] = replace(row, data=raw)
    else:
        from tenure.store.redis.backend import RedisStore

        assert isinstance(store, RedisStore)
        key = store.keys.team(team, "events")
        store.client.xadd(key, {"team": team, "kind": "odd", "at": "0", "data": raw}, id=f"{seq}-1")


if __name__ == "__main__":
    url, team, queue, kind = sys.argv[1:5]
    with open_store(url) as opened:
        print(inject(opened, team, queue, POISONS[kind]))
