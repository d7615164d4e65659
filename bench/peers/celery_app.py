"""Celery side of the benchmark: Redis broker AND Redis result backend, acks_late.

Workers: ``celery -A celery_app worker --pool solo --concurrency 1 --prefetch-multiplier 1
-O fair --without-gossip --without-mingle --without-heartbeat``, one such process per
benchmark worker (``solo`` executes in the consuming process itself: no pool child).
Completion is observed as the task's result key in the result backend.
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

_ready_clients: dict[str, redis.Redis] = {}


def make_app(url: str) -> Celery:
    """The app on one Redis URL (broker and results); the workers build it from $BENCH_URL."""
    app = Celery("bench_peers", broker=url, backend=url)
    app.conf.update(
        task_acks_late=True,  # ack after the task ran: at-least-once, like Tenure
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=False,
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )

    @app.task(name="bench.noop", shared=False)
    def noop() -> None:
        return None

    @app.task(name="bench.sleep", shared=False)
    def sleep(seconds: float) -> None:
        """Slow I/O: a task that only waits."""
        time.sleep(seconds)

    @app.task(name="bench.ready", shared=False)
    def ready() -> None:
        """Warm-up: says which worker process ran it (a short pause spreads these out)."""
        r = _ready_clients.get(url)
        if r is None:
            r = _ready_clients[url] = redis.Redis.from_url(url)
        time.sleep(0.02)
        r.sadd("bench:ready", str(os.getpid()))

    return app


app = make_app(os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/10"))
