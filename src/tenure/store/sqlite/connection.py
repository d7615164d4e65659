"""One SQLite connection per store object: WAL, a busy timeout, and write
transactions that retry while another process holds the lock.

The database file is created ``0600`` (SQLite gives its ``-wal`` and ``-shm`` files
the database's mode), the directories made for it ``0700``; an existing database,
its ``-wal``/``-shm`` and a ``.tenure`` directory holding it are tightened to that
when opened."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from tenure.protocol.errors import StoreUnavailable, StoreUnreachable
from tenure.protocol.private import FILE_MODE, private_dir, private_file, tighten
from tenure.protocol.secrets import pinned
from tenure.store.sqlite.identity import FileIdentity
from tenure.store.sqlite.schema import migrate

T = TypeVar("T")
BUSY_TIMEOUT_MS = 5_000
LOCK_RETRY_SECONDS = 30.0
CHANGE_POLL = (0.001, 0.005)
"""Seconds between two looks at ``PRAGMA data_version`` while a receive waits, from
the first to the longest (the gap grows while nothing changes): a change another
process commits is seen within it, without any lock, and an idle member costs a few
hundred cheap reads a second."""


def open_connection(path: Path) -> sqlite3.Connection:
    try:
        private_dir(path.parent, tighten_existing=False)  # an operator's directory stays
        private_file(path)
        conn = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(f"cannot open SQLite store at {path}: {exc}") from exc
    try:
        return _prepared(conn, path)
    except BaseException:
        conn.close()  # a file that is not a database (or a lock held too long): no leak
        raise


def _prepared(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
        _retry_locked(lambda: migrate(conn))
        for companion in ("-wal", "-shm", "-journal"):
            tighten(path.with_name(path.name + companion), FILE_MODE)
        return conn
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(f"cannot open SQLite store at {path}: {exc}") from exc


class Connection:
    """Serializes this process's use of one connection; retries lock contention."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = open_connection(path)
        self._lock = threading.RLock()
        self._open: sqlite3.Cursor | None = None  # the transaction this lock's holder is in
        self._commits = 0  # this connection's own, which data_version does not count
        self._committed = threading.Condition()
        try:
            self.identity = FileIdentity.of(path, self._conn)
        except (sqlite3.Error, OSError) as exc:
            self._conn.close()
            raise StoreUnavailable(f"cannot open SQLite store at {path}: {exc}") from exc

    def lost_reason(self) -> str | None:
        """Why the file at this store's path is not the database it opened, or None."""
        with self._lock:
            return self.identity.lost_reason(self._conn)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Cursor]:
        """A ``BEGIN IMMEDIATE`` transaction: committed whole or not at all. The known
        secrets its values are redacted of are read before the lock is taken.

        Called again by the thread inside one (a store call made of others, such as
        ``commit``), it joins that transaction: the outermost commits or rolls back."""
        with pinned(), self._lock:
            if self._open is not None:
                yield self._open
                return
            cur = self._conn.cursor()
            _retry_locked(lambda: cur.execute("BEGIN IMMEDIATE"))
            self._open = cur
            try:
                yield cur
            except sqlite3.Error as exc:
                self._rollback(cur)
                raise StoreUnavailable(f"SQLite write failed on {self.path}: {exc}") from exc
            except BaseException:
                self._rollback(cur)
                raise
            finally:
                self._open = None
            try:
                _retry_locked(lambda: cur.execute("COMMIT"))
            except BaseException:
                self._rollback(cur)
                raise
        with self._committed:
            self._commits += 1
            self._committed.notify_all()

    def version(self) -> tuple[int, int]:
        """A token that changes whenever the database may have: this connection's own
        commits, and ``PRAGMA data_version`` for every other connection's (a read of
        the WAL index: no transaction, no lock)."""
        with self._lock:
            try:
                (changed,) = self._conn.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"SQLite read failed on {self.path}: {exc}") from exc
        return self._commits, int(changed)

    def wait_change(self, seen: tuple[int, int], timeout: float) -> None:
        """Return once ``version()`` differs from ``seen``, or after ``timeout`` seconds.
        A commit on this connection (another thread) wakes it at once; another
        process's is seen within ``CHANGE_POLL``."""
        deadline = time.monotonic() + timeout
        gap, longest = CHANGE_POLL
        while self.version() == seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._committed:
                if self._commits == seen[0]:
                    self._committed.wait(min(remaining, gap))
            gap = min(gap * 1.5, longest)

    def read(self, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return _retry_locked(lambda: self._conn.execute(sql, params).fetchall())
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"SQLite read failed on {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @staticmethod
    def _rollback(cur: sqlite3.Cursor) -> None:
        try:
            cur.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # nothing to roll back: the transaction already ended


def _retry_locked(action: Callable[[], T]) -> T:
    """Run ``action``, retrying while the database is locked by another writer."""
    deadline = time.monotonic() + LOCK_RETRY_SECONDS
    delay = 0.005
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            locked = "locked" in str(exc) or "busy" in str(exc)
            if not locked or time.monotonic() > deadline:
                if locked:  # another process holds the write lock: worth waiting for
                    raise StoreUnreachable(f"SQLite: {exc}") from exc
                raise StoreUnavailable(f"SQLite: {exc}") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
