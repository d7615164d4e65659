"""Dramatiq side of the benchmark: Redis broker, Results middleware on Redis.

Workers: ``dramatiq dramatiq_app --processes N --threads T`` (one command, N worker
processes). Messages are acked after the actor ran (Dramatiq's default). Completion
is observed as the message's key in the Redis result backend (``store_results``).
"""

from __future__ import annotations

import os
import time

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends.redis import RedisBackend

QUEUE = "bench"
URL = os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/12")


def make_broker(url: str) -> tuple[RedisBroker, RedisBackend]:
    broker = RedisBroker(url=url)
    backend = RedisBackend(url=url)
    broker.add_middleware(Results(backend=backend))
    broker.declare_queue(QUEUE)
    return broker, backend


broker, backend = make_broker(URL)
dramatiq.set_broker(broker)

_ready_client: redis.Redis | None = None


@dramatiq.actor(queue_name=QUEUE, store_results=True)
def noop() -> None:
    return None


@dramatiq.actor(queue_name=QUEUE, store_results=True, max_retries=0)
def sleep(seconds: float) -> None:
    """Slow I/O: a task that only waits."""
    time.sleep(seconds)


@dramatiq.actor(queue_name=QUEUE, store_results=True)
def ready() -> None:
    """Warm-up: says which worker process ran it (a short pause spreads these out)."""
    global _ready_client
    if _ready_client is None:
        _ready_client = redis.Redis.from_url(URL)
    time.sleep(0.02)
    _ready_client.sadd("bench:ready", str(os.getpid()))
