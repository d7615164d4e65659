"""The embedded default store: one SQLite file shared by every process on a machine."""

from __future__ import annotations

import json
from collections.abc import Iterable

from tenure.protocol.errors import Conflict, LeaseLost, NotFound
from tenure.store.base import check_epoch, next_epoch
from tenure.store.records import Lease, Member
from tenure.store.sqlite.core import SQLiteBase, positive
from tenure.store.sqlite.messages import MessagesMixin
from tenure.store.sqlite.register import RegisterMixin


class SQLiteStore(MessagesMixin, RegisterMixin, SQLiteBase):
    """Atomic by ``BEGIN IMMEDIATE``; the clock is this machine's wall clock."""

    # --- lease ------------------------------------------------------------------------

    def claim_lease(self, team: str, holder: str, ttl: float, *, at_least: int = 0) -> Lease:
        positive("ttl", ttl)
        check_epoch("at_least", at_least)
        with self.db.write() as cur:
            now = self.now()
            row = self._team_row(cur, team)
            if row["holder"] is not None and row["expires_at"] > now:
                raise Conflict(
                    f"team {team!r}: lease held by {row['holder']!r} at epoch {row['lease_epoch']}"
                )
            reported = cur.execute(
                "SELECT highest_epoch FROM members WHERE team = ? AND expires_at > ?",
                (team, now),
            ).fetchall()
            epoch = next_epoch(team, row["epoch"], at_least, [r[0] for r in reported])
            cur.execute(
                "UPDATE teams SET epoch = ?, holder = ?, lease_epoch = ?, expires_at = ?, ttl = ?"
                " WHERE team = ?",
                (epoch, holder, epoch, now + ttl, ttl, team),
            )
            self._event(cur, team, "lease.claimed", {"holder": holder, "ttl": ttl}, epoch)
            return Lease(team, holder, epoch, now + ttl, ttl)

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float) -> Lease:
        check_epoch("epoch", epoch)
        positive("ttl", ttl)
        with self.db.write() as cur:
            now = self.now()
            updated = cur.execute(
                "UPDATE teams SET expires_at = ?, ttl = ? WHERE team = ? AND holder = ?"
                " AND lease_epoch = ? AND expires_at > ?",
                (now + ttl, ttl, team, holder, epoch, now),
            ).rowcount
            if not updated:
                raise LeaseLost(
                    f"team {team!r}: {holder!r} does not hold the lease at epoch {epoch}"
                )
            return Lease(team, holder, epoch, now + ttl, ttl)

    def release_lease(self, team: str, holder: str, epoch: int) -> bool:
        check_epoch("epoch", epoch)
        with self.db.write() as cur:
            released = cur.execute(
                "UPDATE teams SET holder = NULL, lease_epoch = NULL, expires_at = NULL"
                " WHERE team = ? AND holder = ? AND lease_epoch = ?",
                (team, holder, epoch),
            ).rowcount
            if released:
                self._event(cur, team, "lease.released", {"holder": holder}, epoch)
            return bool(released)

    def current_lease(self, team: str) -> Lease | None:
        rows = self.db.read(
            "SELECT holder, lease_epoch, expires_at, ttl FROM teams WHERE team = ?"
            " AND holder IS NOT NULL AND expires_at > ?",
            (team, self.now()),
        )
        if not rows:
            return None
        holder, epoch, expires_at, ttl = rows[0]
        return Lease(team, holder, epoch, expires_at, ttl)

    def current_epoch(self, team: str) -> int:
        rows = self.db.read("SELECT epoch FROM teams WHERE team = ?", (team,))
        return int(rows[0][0]) if rows else 0

    # --- membership ---------------------------------------------------------------------

    def join(
        self,
        team: str,
        member_id: str,
        *,
        ttl: float,
        priority: int = 0,
        capabilities: Iterable[str] = (),
        highest_epoch: int = 0,
    ) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        positive("ttl", ttl)
        caps = tuple(sorted(set(capabilities)))
        with self.db.write() as cur:
            now = self.now()
            self._team_row(cur, team)
            known = cur.execute(
                "SELECT highest_epoch FROM members WHERE team = ? AND member_id = ? AND expires_at > ?",
                (team, member_id, now),
            ).fetchone()
            highest_epoch = max(highest_epoch, known[0] if known else 0)
            cur.execute(
                "INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?, ?, ?, ?)",
                (team, member_id, priority, json.dumps(caps), highest_epoch, now, now + ttl),
            )
            data = {
                "member": member_id,
                "priority": priority,
                "capabilities": list(caps),
                "highest_epoch": highest_epoch,
            }
            self._event(cur, team, "member.joined", data, None)
            return Member(team, member_id, priority, caps, highest_epoch, now, now + ttl)

    def heartbeat(self, team: str, member_id: str, *, ttl: float, highest_epoch: int = 0) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        positive("ttl", ttl)
        with self.db.write() as cur:
            now = self.now()
            row = cur.execute(
                "SELECT * FROM members WHERE team = ? AND member_id = ? AND expires_at > ?",
                (team, member_id, now),
            ).fetchone()
            if row is None:
                raise NotFound(f"team {team!r}: {member_id!r} is not a live member; join again")
            seen = max(row["highest_epoch"], highest_epoch)
            cur.execute(
                "UPDATE members SET expires_at = ?, highest_epoch = ? WHERE team = ? AND member_id = ?",
                (now + ttl, seen, team, member_id),
            )
            caps = tuple(json.loads(row["capabilities"]))
            return Member(team, member_id, row["priority"], caps, seen, row["joined_at"], now + ttl)

    def leave(self, team: str, member_id: str) -> None:
        with self.db.write() as cur:
            gone = cur.execute(
                "DELETE FROM members WHERE team = ? AND member_id = ?", (team, member_id)
            ).rowcount
            if gone:
                self._event(cur, team, "member.left", {"member": member_id}, None)

    def members(self, team: str) -> list[Member]:
        rows = self.db.read(
            "SELECT * FROM members WHERE team = ? AND expires_at > ?"
            " ORDER BY priority DESC, member_id",
            (team, self.now()),
        )
        return [
            Member(
                team,
                r["member_id"],
                r["priority"],
                tuple(json.loads(r["capabilities"])),
                r["highest_epoch"],
                r["joined_at"],
                r["expires_at"],
            )
            for r in rows
        ]
