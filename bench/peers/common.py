"""Shared plumbing of the peer benchmark: Redis DBs, worker processes, completion tracking.

Everything here is bounded: every wait has a deadline, every worker process is
started in its own session and is killed (group-wide) on stop, at exit and on
SIGINT/SIGTERM.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import redis

HOST = os.environ.get("BENCH_REDIS_HOST", "127.0.0.1")
PORT = int(os.environ.get("BENCH_REDIS_PORT", "6379"))
OWN_DBS = frozenset({10, 11, 12, 13})
"""The only Redis databases this benchmark ever writes to or flushes."""

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PYTHON = sys.executable


class BenchError(RuntimeError):
    """A run could not be completed (a timeout, a worker that died, a lost task)."""


def redis_url(db: int) -> str:
    check_db(db)
    return f"redis://{HOST}:{PORT}/{db}"


def check_db(db: int) -> None:
    if db not in OWN_DBS:
        raise BenchError(f"DB {db} is not one of ours ({sorted(OWN_DBS)})")


TRACKER_NAME = "bench-tracker"
"""Client name of the completion trackers (so ``commands.py`` can leave them out)."""


def client(db: int, *, decode: bool = True, name: str | None = None) -> redis.Redis:
    check_db(db)
    return redis.Redis(
        host=HOST,
        port=PORT,
        db=db,
        decode_responses=decode,
        socket_timeout=30,
        socket_connect_timeout=5,
        client_name=name,
    )


def flush(db: int) -> None:
    """FLUSHDB on one of our own databases (never FLUSHALL)."""
    check_db(db)
    with client(db) as r:
        r.flushdb()


# --- claiming a DB ------------------------------------------------------------------------
# Other sessions share this Redis server (and have been seen running test suites on
# DBs in our range). A run takes a DB that is empty, marks it with a token, and
# flushes it afterwards only if the mark is still ours; a mark that vanished during
# the run means someone else flushed the DB, and the run is void.

MARK = "bench:peers:owner"
TOKEN = f"bench-peers:{os.getpid()}:{time.time_ns()}"
DB_ORDER = (10, 12, 13, 11)


class Interference(BenchError):
    """Someone else flushed or wrote into the DB a run was using."""


def claim_db(timeout: float = 120.0) -> int:
    """An empty DB of ours, marked with our token; waits (bounded) while all are busy."""
    deadline = time.monotonic() + timeout
    while True:
        for db in DB_ORDER:
            with client(db) as r:
                if r.get(MARK) == TOKEN:
                    r.flushdb()  # our own leftover (an interrupted run)
                if r.dbsize() == 0 and r.set(MARK, TOKEN, nx=True):
                    return db
        if time.monotonic() > deadline:
            raise BenchError(f"no empty DB among {sorted(OWN_DBS)} for {timeout:g}s")
        time.sleep(1.0)


def still_ours(db: int) -> bool:
    with client(db) as r:
        return bool(r.get(MARK) == TOKEN)


def release_db(db: int) -> bool:
    """Flush the DB if our mark is still there; False (and no flush) if it is not."""
    with client(db) as r:
        if r.get(MARK) != TOKEN:
            return False
        r.flushdb()
        return True


def server_version() -> str:
    with redis.Redis(host=HOST, port=PORT, socket_timeout=5) as r:
        return str(r.info("server")["redis_version"])


# --- processes ------------------------------------------------------------------------

_LIVE: list[subprocess.Popen[bytes]] = []


def spawn(
    argv: Sequence[str], *, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a worker in its own session (so a group kill reaches its children)."""
    out: Any = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(HERE),
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
                **(env or {}),
            },
        )
    finally:
        if log is not None:
            out.close()
    _LIVE.append(proc)
    return proc


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group we created with start_new_session


def stop(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 5.0) -> None:
    """SIGTERM each worker's process group, then SIGKILL whatever is left."""
    procs = list(procs)
    for proc in procs:
        _signal_group(proc, signal.SIGCONT)
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)  # also reaps grandchildren left in the group
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
        if proc in _LIVE:
            _LIVE.remove(proc)


def kill_all() -> None:
    """Last resort (atexit, signals): SIGKILL every worker group we started."""
    for proc in list(_LIVE):
        _signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=1.0)
        _LIVE.remove(proc)


def install_cleanup() -> None:
    atexit.register(kill_all)

    def on_signal(signum: int, frame: object) -> None:
        kill_all()
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def check_alive(procs: Sequence[subprocess.Popen[bytes]], what: str) -> None:
    dead = [p for p in procs if p.poll() is not None]
    if dead:
        codes = ", ".join(f"pid {p.pid} exit {p.returncode}" for p in dead)
        raise BenchError(f"{what}: worker process(es) died ({codes}); see the logs")


# --- waiting and tracking ----------------------------------------------------------------


def wait_until(
    cond: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.02,
    alive: Callable[[], None] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


class Tracker:
    """Counts completions of known task ids, cheaply and the same way on every system.

    ``check(ids)`` answers (in one pipelined round trip) for each id whether its
    completion is recorded in Redis. A poll asks about the oldest pending id only;
    once that one is done, it sweeps the oldest ``window`` pending ids (work is
    roughly FIFO) and goes on sweeping while whole windows are done. So an idle
    poll costs one key lookup, whatever the system.
    """

    def __init__(
        self, ids: Sequence[str], check: Callable[[Sequence[str]], list[bool]], window: int = 256
    ) -> None:
        self.pending = list(ids)
        self.total = len(self.pending)
        self.check = check
        self.window = window

    def poll(self) -> int:
        """Look once (more while progress is made); returns how many are done."""
        if self.pending and not self.check(self.pending[:1])[0]:
            return self.total - len(self.pending)
        while self.pending:
            head = self.pending[: self.window]
            done = self.check(head)
            left = [i for i, ok in zip(head, done, strict=True) if not ok]
            self.pending = left + self.pending[len(head) :]
            if left:
                break  # the oldest are still running: look again after a pause
        return self.total - len(self.pending)

    def wait(
        self,
        *,
        timeout: float,
        what: str,
        interval: float = 0.003,
        alive: Callable[[], None] | None = None,
    ) -> float:
        """Poll until every id is done; returns the ``perf_counter`` when that was seen.

        The pause between polls grows with the elapsed time (0.2% of it, between
        ``interval`` and 50 ms): the end is seen within ~0.2%, and a long run (an
        in-process leader shares this process) is not slowed by the polling.
        """
        started = time.monotonic()
        deadline = started + timeout
        last_alive = 0.0
        while True:
            if self.poll() >= self.total:
                return time.perf_counter()
            now = time.monotonic()
            if now > deadline:
                raise BenchError(
                    f"{what}: {len(self.pending)} of {self.total} tasks not done after {timeout:g}s"
                )
            if alive is not None and now - last_alive > 0.5:
                alive()
                last_alive = now
            time.sleep(min(0.05, max(interval, 0.002 * (now - started))))
