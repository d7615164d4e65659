"""What every part of the SQLite backend shares: the connection, fencing, events."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

from tenure.protocol.errors import ProtocolError, StaleEpoch
from tenure.protocol.secrets import redact_value
from tenure.store.base import Store
from tenure.store.sqlite.connection import Connection


class SQLiteBase(Store):
    shared_across_processes: ClassVar[bool] = True

    def __init__(self, path: str | Path, *, url: str | None = None) -> None:
        self.path = Path(path)
        self.url = url or f"sqlite:///{self.path}"
        self.db = Connection(self.path)

    def now(self) -> float:
        return time.time()

    def lost_reason(self) -> str | None:
        return self.db.lost_reason()

    def _atomic(self) -> AbstractContextManager[object]:
        return self.db.write()

    def close(self) -> None:
        self.db.close()

    def _team_row(self, cur: sqlite3.Cursor, team: str) -> sqlite3.Row:
        cur.execute("INSERT OR IGNORE INTO teams (team, epoch) VALUES (?, 0)", (team,))
        row: sqlite3.Row = cur.execute("SELECT * FROM teams WHERE team = ?", (team,)).fetchone()
        return row

    def _fence(self, cur: sqlite3.Cursor, team: str, epoch: int) -> None:
        row = cur.execute("SELECT epoch FROM teams WHERE team = ?", (team,)).fetchone()
        current = int(row[0]) if row else 0
        if epoch < current:
            raise StaleEpoch(team, epoch, current)

    def _tie(self, cur: sqlite3.Cursor, team: str, holder: str, now: float) -> str | None:
        """The incarnation a hold by ``holder`` is tied to: its live one, or None when
        it is no live member (then only the plain timeout ends the hold)."""
        row = cur.execute(
            "SELECT incarnation FROM members WHERE team = ? AND member_id = ? AND expires_at > ?",
            (team, holder, now),
        ).fetchone()
        return str(row[0]) if row is not None else None

    def _event(
        self, cur: sqlite3.Cursor, team: str, kind: str, data: dict[str, Any], epoch: int | None
    ) -> int:
        # Every change appends an event, so this is where a team becomes known to
        # ``teams()`` (a team may have only messages or events of its own).
        cur.execute("INSERT OR IGNORE INTO teams (team, epoch) VALUES (?, 0)", (team,))
        cur.execute(
            "INSERT INTO events (team, kind, at, epoch, data) VALUES (?, ?, ?, ?, ?)",
            (team, kind, self.now(), epoch, dumps(data)),
        )
        return int(cur.lastrowid or 0)


HOLDER_GONE = (
    "(tie IS NOT NULL AND NOT EXISTS (SELECT 1 FROM members m WHERE m.team = {t}.team"
    " AND m.member_id = {t}.{holder} AND m.incarnation = {t}.tie AND m.expires_at > ?))"
)
"""SQL true once a hold tied to an incarnation outlived it (bind: now)."""


def positive(field: str, value: float) -> None:
    if not value > 0:
        raise ProtocolError(field, f"a positive number of seconds, got {value!r}")


def dumps(value: Any) -> str:
    """``value`` as stored: JSON, with every known secret redacted (``protocol.secrets``)."""
    return json.dumps(redact_value(value), default=str, separators=(",", ":"))
