"""SQLite schema, applied as named migrations recorded in the database itself."""

from __future__ import annotations

import sqlite3
import time

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_initial",
        """
        CREATE TABLE teams (
            team TEXT PRIMARY KEY,
            epoch INTEGER NOT NULL DEFAULT 0,
            holder TEXT,
            lease_epoch INTEGER,
            expires_at REAL,
            ttl REAL
        );
        CREATE TABLE members (
            team TEXT NOT NULL,
            member_id TEXT NOT NULL,
            priority INTEGER NOT NULL,
            capabilities TEXT NOT NULL,
            highest_epoch INTEGER NOT NULL,
            joined_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (team, member_id)
        );
        CREATE TABLE tasks (
            team TEXT NOT NULL,
            task_id TEXT NOT NULL,
            state TEXT NOT NULL,
            version INTEGER NOT NULL,
            epoch INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            assignee TEXT,
            spec TEXT NOT NULL,
            result TEXT,
            reason TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (team, task_id)
        );
        CREATE TABLE effects (
            team TEXT NOT NULL,
            key TEXT NOT NULL,
            status TEXT NOT NULL,
            holder TEXT,
            claim_expires REAL,
            epoch INTEGER NOT NULL,
            result TEXT,
            updated_at REAL NOT NULL,
            PRIMARY KEY (team, key)
        );
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            msg_id TEXT NOT NULL UNIQUE,
            team TEXT NOT NULL,
            queue TEXT NOT NULL,
            payload TEXT NOT NULL,
            sent_at REAL NOT NULL,
            visible_at REAL NOT NULL,
            deliveries INTEGER NOT NULL DEFAULT 0,
            dead INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX messages_ready ON messages (team, queue, dead, visible_at, seq);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            team TEXT NOT NULL,
            kind TEXT NOT NULL,
            at REAL NOT NULL,
            epoch INTEGER,
            data TEXT NOT NULL
        );
        CREATE INDEX events_team ON events (team, seq);
        """,
    ),
    (
        "002_lease_proof",
        """
        ALTER TABLE teams ADD COLUMN claimed_at REAL;
        ALTER TABLE teams ADD COLUMN proof TEXT;
        """,
    ),
    (
        "003_identity",
        # A token drawn once, when the database is made: a member that finds another
        # token (or none) under its path knows the store it opened was replaced.
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta (key, value) VALUES ('identity', lower(hex(randomblob(16))))
        """,
    ),
    (
        # a live member id is exclusive to one incarnation, and what a member holds
        # (a delivered message, a claimed effect) is tied to that incarnation
        "004_incarnations",
        """
        ALTER TABLE members ADD COLUMN incarnation TEXT NOT NULL DEFAULT '';
        ALTER TABLE members ADD COLUMN beat_at REAL NOT NULL DEFAULT 0;
        ALTER TABLE effects ADD COLUMN tie TEXT;
        ALTER TABLE messages ADD COLUMN consumer TEXT;
        ALTER TABLE messages ADD COLUMN tie TEXT;
        """,
    ),
    (
        # how many attempts a member runs at once, and how many of them are free
        "005_member_slots",
        """
        ALTER TABLE members ADD COLUMN slots INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE members ADD COLUMN free_slots INTEGER NOT NULL DEFAULT 1;
        """,
    ),
    (
        # the hash of the lease holder's token (``store.base.token_hash``). A lease
        # claimed before this migration has none and so matches no token: nobody can
        # renew, prove or release it (which anyone reading its holder and epoch could
        # do before), and it lapses by its TTL.
        "006_lease_token",
        """
        ALTER TABLE teams ADD COLUMN token_hash TEXT;
        """,
    ),
]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the migrations this database lacks, each once, in order; return their names."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
        applied = []
        for name, script in MIGRATIONS:
            if name in done:
                continue
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
            applied.append(name)
        conn.execute("COMMIT")
        return applied
    except BaseException:
        conn.execute("ROLLBACK")
        raise
