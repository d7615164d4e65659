"""Shared fixtures: a store per backend, real files and real servers only.

A backend whose server is missing is skipped on a laptop and FAILS in CI
(``CI=true``), so a green CI run always means the backend was exercised.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure.store import Store, open_store
from tenure.store.url import sqlite_path

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REDIS_URL = os.environ.get("TENURE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
BACKENDS = ["sqlite", "redis"]
LEASE_TOKEN = "the-tests-own-lease-token"
"""The holder token tests claim leases with when no other process must be kept out."""

# Importing readline (done while pytest starts) puts COLUMNS=80 and LINES=24 into the
# process's C environment, where os.environ does not see them but every child process
# inherits them: pytest-xdist's workers would start with COLUMNS=80, and the console's
# module-level rich Console would keep 80 columns for the whole run, whatever COLUMNS a
# test passes. Every process starts from the environment the person running pytest had.
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)


SESSION_PREFIX = f"t{uuid.uuid4().hex[:8]}{os.environ.get('PYTEST_XDIST_WORKER', '')}"
"""Every Redis key this test process makes starts with it: two runs sharing one server
(a developer's and CI's, say), or two pytest-xdist workers of one run (each imports this
file itself, so each draws its own; the worker's name, ``gw0``, ends it), never see or
wipe each other's keys."""
_next_prefix = itertools.count(1)


def redis_or_skip() -> str:
    """A Redis store URL with a key prefix of its own (an empty store for this test);
    skip, or fail in CI, when no server answers."""
    if importlib.util.find_spec("tenure.store.redis") is None:
        pytest.skip("the redis backend is not part of this build")
    try:
        import redis
    except ImportError:
        message = "redis client missing: pip install 'tenure[redis]'"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        message = f"no Redis server at {REDIS_URL} ({exc}); start redis-server to run this test"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    finally:
        client.close()
    separator = "&" if "?" in REDIS_URL else "?"
    return f"{REDIS_URL}{separator}prefix={SESSION_PREFIX}-{next(_next_prefix)}"


def wipe_redis(url: str, *, keep_identity: bool = False) -> int:
    """Delete every key of the store at ``url`` (its prefix only): the store is lost,
    as after a restart of a Redis that keeps nothing on disk, and its members stop.
    ``keep_identity`` keeps the store's identity token: the state is gone but the
    members take it for their store, as after a failover to a replica that had
    received nothing yet. Returns the keys deleted."""
    import redis

    from tenure.store.redis.connection import Keys, parse_url

    target = parse_url(url)
    client = redis.Redis.from_url(target.client_url)
    kept = Keys(target.prefix).identity if keep_identity else None
    try:
        found = client.scan_iter(match=f"{target.prefix}:*", count=1000)
        keys = [key for key in found if key.decode() != kept]
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        return len(keys)
    finally:
        client.close()


@pytest.fixture(scope="session", autouse=True)
def _drop_this_runs_redis_keys() -> Iterator[None]:
    """At the end of the session, delete the keys this process's tests made (Redis is
    shared): under pytest-xdist each worker deletes its own, and no one else's."""
    yield
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{SESSION_PREFIX}-*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()
    except Exception:  # noqa: BLE001 - no server or no client: nothing was made
        pass


def _sqlite_write_lock_frees(url: str, within: float) -> bool:
    """Whether the write lock of the SQLite store at ``url`` is free at some moment
    ``within`` seconds (taken and given back at once)."""
    conn = sqlite3.connect(sqlite_path(url), timeout=0, isolation_level=None)
    try:
        deadline = time.monotonic() + within
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # locked: someone is inside a write
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)
            else:
                conn.execute("ROLLBACK")
                return True
    finally:
        conn.close()


def sigstop_between_writes(pid: int, store_url: str) -> float:
    """SIGSTOP ``pid`` at a moment it is not inside a SQLite write transaction; return
    the wall-clock time of the stop that stayed.

    SQLite has one write lock per database file. A member stopped between ``BEGIN
    IMMEDIATE`` and ``COMMIT`` keeps it, and every other member's write waits for it (up
    to the backend's lock retry, 30 s): the whole team stands still, not the one member
    a pause scenario means to take away. So while it is stopped the lock must come free
    at some moment within 0.3 s (others hold it for milliseconds); if it does not, the
    stopped process holds it: it is let run a little and stopped again. A Redis store has
    no such lock: one stop."""
    for _ in range(50):
        sent = time.time()
        os.kill(pid, signal.SIGSTOP)
        if not store_url.startswith("sqlite:") or _sqlite_write_lock_frees(store_url, 0.3):
            return sent
        os.kill(pid, signal.SIGCONT)
        time.sleep(random.uniform(0.01, 0.05))
    raise AssertionError(f"pid {pid} held the SQLite write lock at each of 50 stops")


def url_for(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    if backend == "redis":
        return redis_or_skip()
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store URL for each backend."""
    return url_for(request.param, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


class PrivateRedis:
    """A redis-server of this test's own (nothing saved to disk), to pause and resume:
    the shared server other tests use is never stopped."""

    def __init__(self, popen: subprocess.Popen[bytes], port: int) -> None:
        self.popen = popen
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0?socket_timeout=1&prefix=private"

    def pause(self) -> None:
        os.kill(self.popen.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.popen.pid, signal.SIGCONT)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """Start ``redis-server`` on a free port; skip (fail in CI) when it is not installed."""
    binary = shutil.which("redis-server")
    if binary is None or importlib.util.find_spec("redis") is None:
        message = "redis-server (and the redis client) are needed for a private Redis to pause"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    import redis

    port = _free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    popen = subprocess.Popen(
        [*args, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    server = PrivateRedis(popen, port)
    client = redis.Redis(port=port, socket_timeout=1)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline or popen.poll() is not None:
                    raise
                time.sleep(0.05)
        yield server
    finally:
        client.close()
        if popen.poll() is None:
            os.kill(popen.pid, signal.SIGCONT)
            popen.terminate()
            popen.wait(timeout=10)
