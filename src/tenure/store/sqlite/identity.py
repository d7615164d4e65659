"""Noticing that the SQLite file a store opened is not the one at its path any more.

An open connection keeps reading and writing the file it opened, even after that
file was deleted or renamed over (its writes then go nowhere anyone reads), and its
page cache can hide a truncation or a copy over it. So the file is looked at from
outside the connection: the path's inode, its size (a database file never shrinks:
Tenure never vacuums), and the identity token read through a fresh connection of its
own, which sees what is in the file now (an overwritten header fails that read).

Never with a plain ``open()`` of the file: closing any descriptor of a SQLite file
drops every POSIX lock this process holds on it, and another process, seeing no
reader, may then delete the write-ahead log under the live connections (their
writes would go nowhere). A second SQLite connection is safe: SQLite shares one
lock state per file within a process.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FileIdentity:
    """What the store's file was when it was opened, and the largest size seen since."""

    path: Path
    device: int
    inode: int
    size: int
    token: str

    @classmethod
    def of(cls, path: Path, conn: sqlite3.Connection) -> FileIdentity:
        info = path.stat()
        return cls(path, info.st_dev, info.st_ino, info.st_size, read_token(conn) or "")

    def lost_reason(self, conn: sqlite3.Connection) -> str | None:
        """Why the file at ``path`` is no longer this store's, or None."""
        where = f"SQLite store {self.path}"
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return f"{where} was deleted"
        if (info.st_dev, info.st_ino) != (self.device, self.inode):
            return f"{where} was replaced by another file"
        if info.st_size < self.size:
            return f"{where} was truncated or overwritten"
        self.size = info.st_size
        try:
            token = _fresh_token(self.path)
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                return f"{where} was truncated or overwritten"
            token = None
        except sqlite3.Error:
            token = None
        if token != self.token:
            return f"{where} was replaced: it is not the database this member opened"
        return None


def read_token(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
    return str(row[0]) if row else None


def _fresh_token(path: Path) -> str | None:
    """The token as a new connection reads it (never creating the file: ``mode=rw``)."""
    fresh = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5.0)
    try:
        return read_token(fresh)
    finally:
        fresh.close()

