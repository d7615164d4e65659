from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import LeaseLost
from tenure.store import open_store
from tenure.store.sqlite.schema import MIGRATIONS


def test_sqlite_store_opens_and_records_its_migrations(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    rows = store.db.read("SELECT name FROM migrations")  # type: ignore[attr-defined]
    assert [row[0] for row in rows] == [
        "001_initial",
        "002_lease_proof",
        "003_identity",
        "004_incarnations",
        "005_member_slots",
        "006_lease_token",
    ]
    store.close()


def test_a_database_from_before_lease_proofs_keeps_its_lease(tmp_path: Path) -> None:
    """An older file gains the lease's claim time and proof; a lease it held reads as
    unproven (its candidates, if they sign, seize it once the grace is over)."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    name, script = MIGRATIONS[0]
    conn.executescript(script)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    conn.execute("INSERT INTO migrations VALUES (?, 0)", (name,))
    conn.execute("INSERT INTO teams VALUES ('t', 4, 'L1', 4, ?, 30.0)", (time.time() + 30,))
    conn.commit()
    conn.close()
    with open_store(f"sqlite:///{path}") as store:
        lease = store.current_lease("t")
        assert lease is not None
        assert (lease.holder, lease.epoch, lease.proof, lease.claimed_at) == ("L1", 4, None, 0.0)


def test_a_lease_from_before_lease_tokens_can_be_ended_by_nobody(tmp_path: Path) -> None:
    """An older file gains the token hash column; a live lease it held has none, so no
    token renews, proves or releases it (its holder and epoch are all anyone knew of
    it): it stays readable, and lapses by its TTL; then a claim takes over as usual."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for name, script in MIGRATIONS[:5]:
        conn.executescript(script)
        conn.execute("INSERT INTO migrations VALUES (?, 0)", (name,))
    conn.execute(
        "INSERT INTO teams (team, epoch, holder, lease_epoch, expires_at, ttl, claimed_at)"
        " VALUES ('t', 4, 'L1', 4, ?, 1.0, ?)",
        (time.time() + 1.0, time.time()),
    )
    conn.commit()
    conn.close()
    with open_store(f"sqlite:///{path}") as store:
        lease = store.current_lease("t")
        assert lease is not None and (lease.holder, lease.epoch) == ("L1", 4)
        for token in (LEASE_TOKEN, "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"):
            assert store.release_lease("t", "L1", 4, token=token) is False
            with pytest.raises(LeaseLost):
                store.renew_lease("t", "L1", 4, 30.0, token=token)
            with pytest.raises(LeaseLost):
                store.prove_lease("t", "L1", 4, "cHJvb2Y=", token=token)
        assert store.current_lease("t") == lease
        assert [e.kind for e in store.events("t")] == []
        time.sleep(max(0.0, lease.expires_at - time.time()) + 0.05)
        assert store.current_lease("t") is None
        assert store.claim_lease("t", "L2", 30.0, token=LEASE_TOKEN).epoch == 5


def test_a_database_from_before_member_slots_keeps_its_members(tmp_path: Path) -> None:
    """An older file gains the members' slots: a member it lists has one, free."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for name, script in MIGRATIONS[:4]:
        conn.executescript(script)
        conn.execute("INSERT INTO migrations VALUES (?, 0)", (name,))
    conn.execute(
        "INSERT INTO members (team, member_id, priority, capabilities, highest_epoch,"
        " joined_at, expires_at, incarnation, beat_at) VALUES ('t', 'w1', 0, '[\"work\"]',"
        " 2, 0, ?, 'abc', 0)",
        (time.time() + 30,),
    )
    conn.commit()
    conn.close()
    with open_store(f"sqlite:///{path}") as store:
        [member] = store.members("t")
        assert (member.member_id, member.slots, member.free_slots) == ("w1", 1, 1)
        beat = store.heartbeat("t", "w1", ttl=5.0, incarnation="abc", free_slots=0)
        assert (beat.slots, beat.free_slots, beat.highest_epoch) == (1, 0, 2)
