"""The executor the fault scenarios' worker processes run (``python:ledger_agent:run``).

It sleeps a little, then appends one line to a side-effect LEDGER file through
``ctx.effect("ledger", ...)``, the task-scoped idempotent effect, so the line is
written at most once per task across attempts, workers and leaders. The test
reads the ledger afterwards: one line per task is the whole claim.

Configured by environment variables (set per worker process by the harness):

- ``TENURE_FAULTS_LEDGER``: the ledger file (required).
- ``TENURE_FAULTS_SLEEP``: seconds before the effect, ``"0.4"`` or ``"0.2-0.6"``.
- ``TENURE_FAULTS_SLEEP_RETRY``: the same for attempts after the first (default: as above).
- ``TENURE_FAULTS_STARTED``: optional file; one line per attempt *started*
  (not an effect), so a test knows when a worker is mid-task.
- ``TENURE_FAULTS_KEYED``: ``1`` makes the ledger an effect site that honours the
  idempotency key itself (as a payment API's idempotency key or a unique
  constraint does): a second write for the same key is refused and noted in
  ``<ledger>.refused``. The store-loss scenario needs it, because a wiped store
  forgets its own ledger.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import time
from typing import Any

from tenure.executors import TaskContext
from tenure.protocol import TaskEnvelope

LEDGER_ENV = "TENURE_FAULTS_LEDGER"
SLEEP_ENV = "TENURE_FAULTS_SLEEP"
RETRY_SLEEP_ENV = "TENURE_FAULTS_SLEEP_RETRY"
STARTED_ENV = "TENURE_FAULTS_STARTED"
KEYED_ENV = "TENURE_FAULTS_KEYED"


def _append(path: str, record: dict[str, Any]) -> None:
    """One short line with O_APPEND: atomic against the other worker processes."""
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_once(path: str, record: dict[str, Any]) -> dict[str, Any]:
    """The keyed effect site: under a file lock, a task already in the ledger is
    refused (and the refusal noted); the first record is returned instead."""
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as existing:
                for line in existing:
                    earlier = json.loads(line)
                    if earlier["task_id"] == record["task_id"]:
                        _append(path + ".refused", record)
                        return dict(earlier)
        except FileNotFoundError:
            pass
        _append(path, record)
        return record


def _sleep_seconds(attempt: int) -> float:
    spec = os.environ.get(SLEEP_ENV, "0.2-0.6")
    if attempt > 1:
        spec = os.environ.get(RETRY_SLEEP_ENV, spec)
    low, _, high = spec.partition("-")
    return random.uniform(float(low), float(high or low))


def run(envelope: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
    ledger = os.environ[LEDGER_ENV]
    who = {
        "task_id": envelope.task_id,
        "attempt": envelope.attempt,
        "epoch": envelope.epoch,
        "worker": ctx.worker_id,
        "pid": os.getpid(),
    }
    started = os.environ.get(STARTED_ENV)
    if started:
        _append(started, {**who, "goal": envelope.goal, "time": time.time()})
    time.sleep(_sleep_seconds(envelope.attempt))

    def write_ledger() -> dict[str, Any]:
        record = {**who, "time": time.time()}
        if os.environ.get(KEYED_ENV) == "1":
            return _append_once(ledger, record)
        _append(ledger, record)
        return record

    written = ctx.effect("ledger", write_ledger)
    return {"task_id": envelope.task_id, "ledger": written}
