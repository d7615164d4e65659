"""A coding run in a Tenure store: the team ``code/<run>`` and its leadership lease.

The run's leader claims the lease before it touches anything, with the same
``LeaseKeeper`` every leader uses; its holder id is ``host:pid``, so a resume on
the same host takes over (seizes, at a new epoch) the lease of a leader process
that was killed instead of waiting out the TTL: it cannot release it, since only
the dead process knew the lease's token. A live or stopped holder keeps its lease
until it expires, and a second leader is refused in one line naming it.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from pathlib import Path

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors.worktrees import TENURE_DIR
from tenure.protocol.errors import ConfigError, Conflict
from tenure.store import ALLOWED_TRANSITIONS, Lease, Store, TaskState

TEAM_PREFIX = "code"
DEFAULT_LEASE_TTL = 10.0

__all__ = [
    "DEFAULT_LEASE_TTL",
    "RunLeased",
    "claim_run",
    "default_store_url",
    "holder_id",
    "route",
    "team_for",
]


class RunLeased(ConfigError):
    """Another live leader holds the run's lease."""


def team_for(run_id: str) -> str:
    return f"{TEAM_PREFIX}/{run_id}"


def default_store_url(root: Path) -> str:
    """A coding run's default state database: a SQLite file in the repository's .tenure/."""
    return f"sqlite:///{root / TENURE_DIR / 'state.db'}"


def holder_id() -> str:
    """``host:pid``: who leads, and on the same host, whether that process still lives."""
    return f"{socket.gethostname()}:{os.getpid()}"


def claim_run(store: Store, run_id: str, timing: LeaseTiming, *, at_least: int = 0) -> LeaseKeeper:
    """The run's lease, claimed above ``at_least``; ``RunLeased`` while another leader holds it."""
    team = team_for(run_id)
    keeper = LeaseKeeper(store, team, holder_id(), timing)
    try:
        dead = _lease_of_dead_holder(store, team)
        if dead is not None:
            keeper.seize(dead, at_least=at_least)
        else:
            keeper.claim(at_least=at_least)
    except Conflict:
        raise RunLeased(_refusal(store, run_id)) from None
    return keeper


def _refusal(store: Store, run_id: str) -> str:
    lease = store.current_lease(team_for(run_id))
    if lease is None:
        return f"run {run_id}: its lease was taken at the same moment; run again"
    left = max(0.0, lease.expires_at - store.now())
    return (
        f"run {run_id} is already led by {lease.holder} (epoch {lease.epoch}, lease "
        f"live for {left:.0f}s more): wait for that `tenure code` to finish, or stop it "
        "and run this again once its lease has expired"
    )


def _lease_of_dead_holder(store: Store, team: str) -> Lease | None:
    """The live lease of a holder on this host whose process is gone (killed): it cannot
    renew, so a resume takes it over now instead of waiting for the TTL. A live or
    stopped process keeps its lease until it expires (None)."""
    lease = store.current_lease(team)
    if lease is None:
        return None
    host, _, pid = lease.holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return lease
    except PermissionError:
        return None
    return None


def route(start: TaskState, target: TaskState) -> list[TaskState]:
    """The shortest chain of allowed register transitions from ``start`` to ``target``."""
    paths: deque[list[TaskState]] = deque([[start]])
    seen = {start}
    while paths:
        path = paths.popleft()
        for step in sorted(ALLOWED_TRANSITIONS[path[-1]]):
            if step == target:
                return [*path[1:], step]
            if step not in seen:
                seen.add(step)
                paths.append([*path, step])
    return []
