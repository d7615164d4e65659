"""The embedded default store: one SQLite file shared by every process on a machine."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from tenure.protocol.errors import Conflict, LeaseLost, NotFound
from tenure.store.records import Lease, Member
from tenure.store.rules import (
    check_epoch,
    check_free,
    check_priority,
    check_proof,
    check_slots,
    check_token,
    next_epoch,
    same_lease,
    taken,
    token_hash,
    token_matches,
)
from tenure.store.sqlite.core import SQLiteBase, positive
from tenure.store.sqlite.messages import MessagesMixin
from tenure.store.sqlite.register import RegisterMixin


class SQLiteStore(MessagesMixin, RegisterMixin, SQLiteBase):
    """Atomic by ``BEGIN IMMEDIATE``; the clock is this machine's wall clock."""

    # --- lease ------------------------------------------------------------------------

    def claim_lease(
        self, team: str, holder: str, ttl: float, *, token: str, at_least: int = 0
    ) -> Lease:
        positive("ttl", ttl)
        check_epoch("at_least", at_least)
        check_token(token)
        with self.db.write() as cur:
            now = self.now()
            row = self._team_row(cur, team)
            if row["holder"] is not None and row["expires_at"] > now:
                raise Conflict(
                    f"team {team!r}: lease held by {row['holder']!r} at epoch {row['lease_epoch']}"
                )
            return self._grant(cur, team, holder, ttl, at_least, token, now, {})

    def seize_lease(
        self, team: str, holder: str, ttl: float, *, over: Lease, token: str, at_least: int = 0
    ) -> Lease:
        positive("ttl", ttl)
        check_epoch("at_least", at_least)
        check_token(token)
        with self.db.write() as cur:
            row = self._team_row(cur, team)
            if not same_lease(_lease(team, row), over):
                raise Conflict(
                    f"team {team!r}: the lease is no longer {over.holder!r}'s at epoch {over.epoch}"
                )
            seized = {"over_holder": over.holder, "over_epoch": over.epoch}
            return self._grant(cur, team, holder, ttl, at_least, token, self.now(), seized)

    def _grant(
        self,
        cur: sqlite3.Cursor,
        team: str,
        holder: str,
        ttl: float,
        at_least: int,
        token: str,
        now: float,
        extra: dict[str, Any],
    ) -> Lease:
        """A new lease at the next epoch, unproven (inside the caller's transaction)."""
        row = self._team_row(cur, team)
        reported = cur.execute(
            "SELECT highest_epoch FROM members WHERE team = ? AND expires_at > ?",
            (team, now),
        ).fetchall()
        epoch = next_epoch(team, row["epoch"], at_least, [r[0] for r in reported])
        cur.execute(
            "UPDATE teams SET epoch = ?, holder = ?, lease_epoch = ?, expires_at = ?, ttl = ?,"
            " claimed_at = ?, proof = NULL, token_hash = ? WHERE team = ?",
            (epoch, holder, epoch, now + ttl, ttl, now, token_hash(token), team),
        )
        data = {"holder": holder, "ttl": ttl, **extra}
        self._event(cur, team, "lease.claimed", data, epoch)
        return Lease(team, holder, epoch, now + ttl, ttl, claimed_at=now)

    def prove_lease(self, team: str, holder: str, epoch: int, proof: str, *, token: str) -> Lease:
        check_epoch("epoch", epoch)
        check_proof(proof)
        with self.db.write() as cur:
            held = self._held(cur, team, holder, epoch, token)
            cur.execute("UPDATE teams SET proof = ? WHERE team = ?", (proof, team))
            self._event(cur, team, "lease.proved", {"holder": holder}, epoch)
            return replace(held, proof=proof)

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float, *, token: str) -> Lease:
        check_epoch("epoch", epoch)
        positive("ttl", ttl)
        with self.db.write() as cur:
            held = self._held(cur, team, holder, epoch, token)
            now = self.now()
            cur.execute(
                "UPDATE teams SET expires_at = ?, ttl = ? WHERE team = ?", (now + ttl, ttl, team)
            )
            return replace(held, expires_at=now + ttl, ttl=ttl)

    def _held(self, cur: sqlite3.Cursor, team: str, holder: str, epoch: int, token: str) -> Lease:
        """The live lease ``holder`` holds at ``epoch`` with ``token``, else ``LeaseLost``."""
        row = cur.execute("SELECT * FROM teams WHERE team = ?", (team,)).fetchone()
        held = _lease(team, row) if row is not None else None
        if (
            held is None
            or (held.holder, held.epoch) != (holder, epoch)
            or not held.expires_at > self.now()
            or not token_matches(row["token_hash"], token)
        ):
            raise LeaseLost(f"team {team!r}: {holder!r} does not hold the lease at epoch {epoch}")
        return held

    def release_lease(self, team: str, holder: str, epoch: int, *, token: str) -> bool:
        check_epoch("epoch", epoch)
        with self.db.write() as cur:
            row = cur.execute(
                "SELECT token_hash FROM teams WHERE team = ? AND holder = ? AND lease_epoch = ?",
                (team, holder, epoch),
            ).fetchone()
            if row is None or not token_matches(row["token_hash"], token):
                return False
            cur.execute(
                "UPDATE teams SET holder = NULL, lease_epoch = NULL, expires_at = NULL,"
                " proof = NULL, token_hash = NULL WHERE team = ?",
                (team,),
            )
            self._event(cur, team, "lease.released", {"holder": holder}, epoch)
            return True

    def current_lease(self, team: str) -> Lease | None:
        rows = self.db.read("SELECT * FROM teams WHERE team = ?", (team,))
        lease = _lease(team, rows[0]) if rows else None
        return lease if lease is not None and lease.expires_at > self.now() else None

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
        incarnation: str = "",
        slots: int = 1,
        free_slots: int | None = None,
    ) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        positive("ttl", ttl)
        check_slots(slots)
        check_priority(priority)
        check_free(free_slots)
        free = slots if free_slots is None else min(free_slots, slots)
        caps = tuple(sorted(set(capabilities)))
        with self.db.write() as cur:
            now = self.now()
            self._team_row(cur, team)
            known = self._live(cur, team, member_id, now)
            if known is not None and known["incarnation"] != incarnation:
                raise taken(team, member_id, now, known["beat_at"], known["expires_at"])
            highest_epoch = max(highest_epoch, known["highest_epoch"] if known else 0)
            cur.execute(
                "INSERT OR REPLACE INTO members (team, member_id, priority, capabilities,"
                " highest_epoch, joined_at, expires_at, incarnation, beat_at, slots, free_slots)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (team, member_id, priority, json.dumps(caps), highest_epoch, now, now + ttl)
                + (incarnation, now, slots, free),
            )
            data = {
                "member": member_id,
                "priority": priority,
                "capabilities": list(caps),
                "highest_epoch": highest_epoch,
                "slots": slots,
            }
            self._event(cur, team, "member.joined", data, None)
            return Member(
                team,
                member_id,
                priority,
                caps,
                highest_epoch,
                now,
                now + ttl,
                incarnation,
                now,
                slots,
                free,
            )

    def heartbeat(
        self,
        team: str,
        member_id: str,
        *,
        ttl: float,
        highest_epoch: int = 0,
        incarnation: str = "",
        free_slots: int | None = None,
    ) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        positive("ttl", ttl)
        check_free(free_slots)
        with self.db.write() as cur:
            now = self.now()
            row = self._live(cur, team, member_id, now)
            if row is None:
                raise NotFound(f"team {team!r}: {member_id!r} is not a live member; join again")
            if row["incarnation"] != incarnation:
                raise taken(team, member_id, now, row["beat_at"], row["expires_at"])
            seen = max(row["highest_epoch"], highest_epoch)
            free = row["free_slots"] if free_slots is None else min(free_slots, row["slots"])
            cur.execute(
                "UPDATE members SET expires_at = ?, highest_epoch = ?, beat_at = ?,"
                " free_slots = ? WHERE team = ? AND member_id = ?",
                (now + ttl, seen, now, free, team, member_id),
            )
            beat = {"expires_at": now + ttl, "highest_epoch": seen, "beat_at": now}
            return _member(team, {**dict(row), **beat, "free_slots": free})

    def _live(
        self, cur: sqlite3.Cursor, team: str, member_id: str, now: float
    ) -> sqlite3.Row | None:
        row: sqlite3.Row | None = cur.execute(
            "SELECT * FROM members WHERE team = ? AND member_id = ? AND expires_at > ?",
            (team, member_id, now),
        ).fetchone()
        return row

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
        return [_member(team, r) for r in rows]


def _member(team: str, r: sqlite3.Row | dict[str, Any]) -> Member:
    return Member(
        team,
        r["member_id"],
        r["priority"],
        tuple(json.loads(r["capabilities"])),
        r["highest_epoch"],
        r["joined_at"],
        r["expires_at"],
        r["incarnation"],
        r["beat_at"],
        r["slots"],
        min(r["free_slots"], r["slots"]),
    )


def _lease(team: str, row: sqlite3.Row) -> Lease | None:
    """The lease a ``teams`` row records, live or lapsed; None when vacant."""
    if row["holder"] is None:
        return None
    return Lease(
        team,
        row["holder"],
        int(row["lease_epoch"]),
        float(row["expires_at"]),
        float(row["ttl"]),
        claimed_at=float(row["claimed_at"] or 0.0),
        proof=row["proof"],
    )
