"""The ceiling: a bare redis-py consumer, XREADGROUP (COUNT 1, BLOCK) -> decode -> XACK.

``python raw_worker.py URL CONSUMER``. One message per read, one XACK per message:
the fewest round trips an at-least-once consumer on Redis Streams can make.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import redis

STREAM = "bench:raw"
GROUP = "bench"


def ensure_group(r: redis.Redis) -> None:
    try:
        r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def main() -> None:
    url, consumer = sys.argv[1], sys.argv[2]
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    r = redis.Redis.from_url(url, socket_timeout=30)
    ensure_group(r)
    while not stopping:
        reply = r.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=1, block=500)
        for _stream, entries in reply or []:
            for message_id, fields in entries:
                task = json.loads(fields[b"p"])
                if task.get("kind") == "ready":
                    time.sleep(0.02)
                    r.sadd("bench:ready", f"{consumer}:{os.getpid()}")
                r.xack(STREAM, GROUP, message_id)


if __name__ == "__main__":
    main()
