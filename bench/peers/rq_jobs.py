"""RQ side of the benchmark: jobs imported by ``rq worker`` (default ``Worker`` class,
which forks a work horse per job; ``--rq-class simple`` uses ``SimpleWorker``).
Completion is observed as the job hash's ``status`` = ``finished``.
"""

from __future__ import annotations

import os
import time

import redis
from rq import get_current_job

URL = os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/11")


def noop() -> None:
    return None


def ready() -> None:
    """Warm-up: says which worker ran it (a short pause spreads these out)."""
    job = get_current_job()
    name = (job.worker_name if job is not None else None) or str(os.getpid())
    time.sleep(0.02)
    with redis.Redis.from_url(URL) as r:
        r.sadd("bench:ready", name)
