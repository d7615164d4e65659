"""Small helpers shared by the contract tests (public Store API only)."""

from __future__ import annotations

import time

from tenure.store import Event, Store

TEAM = "team-a"
OTHER_TEAM = "team-b"

SHORT_TTL = 0.3
"""Short enough to wait out in a test, long enough to act on before it passes."""


def wait_out(ttl: float = SHORT_TTL, margin: float = 0.1) -> None:
    """Sleep past a short TTL (the store clock runs at wall-clock speed)."""
    time.sleep(ttl + margin)


def kinds(store: Store, team: str | None = TEAM, *, after: int = 0) -> list[str]:
    return [event.kind for event in store.events(team, after=after)]


def last_seq(store: Store, team: str | None = None) -> int:
    found = store.events(team, limit=1_000_000)
    return found[-1].seq if found else 0


def new_events(store: Store, after: int, team: str | None = TEAM) -> list[Event]:
    return store.events(team, after=after)
