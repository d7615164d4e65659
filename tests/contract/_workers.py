"""Bodies of the racing OS processes (started with the "spawn" method).

Each worker opens its own store from the URL, waits at a shared barrier so all
of them start together, races, and puts what it saw on the result queue. Only
the public Store API is used, so every backend races the same way.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable
from typing import Any

from tenure.protocol.errors import Conflict, EffectInProgress
from tenure.store import Lease, Store, new_lease_token, open_store

BARRIER_TIMEOUT = 60.0
GIVE_UP_SECONDS = 30.0
"""A racing loop that has not finished by then raises instead of hanging the test."""


def _give_up_at() -> float:
    return time.monotonic() + GIVE_UP_SECONDS


def _check(deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"{what} did not finish in {GIVE_UP_SECONDS}s")


def run(body: Callable[..., Any], url: str, name: str, barrier: Any, out: Any, *args: Any) -> None:
    """Open the store, wait for the others, race; report (name, result or error)."""
    try:
        store = open_store(url)
        try:
            barrier.wait(BARRIER_TIMEOUT)
            out.put((name, "ok", body(store, name, *args)))
        finally:
            store.close()
    except BaseException:
        out.put((name, "error", traceback.format_exc()))


def claim_loop(
    store: Store, name: str, team: str, seconds: float, ttl: float
) -> list[tuple[int, str]]:
    """Claim the team's lease over and over; return every (epoch, holder) granted."""
    rng = random.Random(name)
    granted: list[tuple[int, str]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            token = new_lease_token()
            lease = store.claim_lease(team, name, ttl, token=token)
        except Conflict:
            time.sleep(rng.uniform(0, ttl / 4))
            continue
        granted.append((lease.epoch, lease.holder))
        if rng.random() < 0.5:
            store.release_lease(team, name, lease.epoch, token=token)
    return granted


def transition_each(
    store: Store, name: str, team: str, task_ids: list[str], epoch: int
) -> list[str]:
    """Try queued -> running at version 1 on each task in turn; return the ones won."""
    won = []
    for task_id in task_ids:
        try:
            store.transition(
                team,
                task_id,
                epoch=epoch,
                expect=["queued"],
                to="running",
                version=1,
                assignee=name,
            )
        except Conflict:
            continue
        won.append(task_id)
    return won


def increment_loop(
    store: Store, name: str, team: str, task_id: str, epoch: int, target: int
) -> list[tuple[int, int]]:
    """Read-modify-write a counter by compare-and-set until it reaches ``target``.

    Returns (version read, version written) for every write this process won.
    """
    won: list[tuple[int, int]] = []
    deadline = _give_up_at()
    while True:
        _check(deadline, "the compare-and-set loop")
        record = store.get_task(team, task_id)
        count = int(record.data.get("count", 0))
        if count >= target:
            return won
        try:
            written = store.transition(
                team,
                task_id,
                epoch=epoch,
                expect=[record.state],
                to=record.state,
                version=record.version,
                data={"count": count + 1, "by": name},
            )
        except Conflict:
            continue
        won.append((record.version, written.version))


def effect_keys(
    store: Store, name: str, team: str, epoch: int, keys: list[str]
) -> dict[str, tuple[str, Any]]:
    """For each key: run the effect if ours to run, else wait for its result.

    Returns key -> ("run", result written) or ("done", result read).
    """
    seen: dict[str, tuple[str, Any]] = {}
    deadline = _give_up_at()
    for key in keys:
        while True:
            _check(deadline, f"waiting for effect {key!r}")
            try:
                ticket = store.effect_begin(team, key, epoch=epoch, holder=name, claim_seconds=30.0)
            except EffectInProgress:
                time.sleep(0.002)
                continue
            if ticket.status == "run":
                result = {"by": name, "key": key}
                store.effect_finish(team, key, holder=name, result=result)
                seen[key] = ("run", result)
            else:
                seen[key] = ("done", ticket.result)
            break
    return seen


def drain(store: Store, name: str, team: str, queue: str) -> list[int]:
    """Receive, ack promptly, until the queue stays empty; return payload numbers seen."""
    seen: list[int] = []
    empty = 0
    deadline = _give_up_at()
    while empty < 3:
        _check(deadline, "draining the queue")
        batch = store.receive(team, queue, consumer=name, visibility_timeout=30.0, max_messages=3)
        if not batch:
            empty += 1
            time.sleep(0.01)
            continue
        empty = 0
        for delivery in batch:
            seen.append(int(delivery.payload["n"]))
            assert store.ack(team, queue, delivery.message_id)
    return seen


def seize_once(store: Store, name: str, team: str, holder: str, epoch: int) -> int | None:
    """Seize the unproven lease ``holder`` holds at ``epoch``; the new epoch, or None."""
    refused = Lease(team, holder, epoch, 0.0, 0.0)
    try:
        return store.seize_lease(team, name, 30.0, over=refused, token=new_lease_token()).epoch
    except Conflict:
        return None
