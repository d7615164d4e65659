"""Races between real OS processes, each with its own store connection.

The store's compare-and-set, not timing, must guarantee one winner: these
tests start several spawned processes at one barrier and check what each of
them was granted against the store's own event log.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from conftest import LEASE_TOKEN
from tenure.store import Store

from . import _workers

pytestmark = pytest.mark.slow

TEAM = "race"
JOIN_TIMEOUT = 90.0


@pytest.fixture(autouse=True)
def _processes_share_the_store(store: Store) -> None:
    """A race needs one store that several OS processes open by its URL."""
    if not store.shared_across_processes:
        pytest.skip(
            f"{type(store).__name__} cannot be shared between processes:"
            " each racer would open a store of its own"
        )


def race(url: str, body: Callable[..., Any], processes: int, *args: Any) -> dict[str, Any]:
    """Run ``body(store, name, *args)`` in ``processes`` spawned processes; name -> result."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    out = ctx.Queue()
    names = [f"p{i}" for i in range(processes)]
    procs = [
        ctx.Process(
            target=_workers.run,
            args=(body, url, name, barrier, out, *args),
            name=name,
            daemon=True,
        )
        for name in names
    ]
    for proc in procs:
        proc.start()
    results: dict[str, Any] = {}
    errors: list[str] = []
    deadline = time.monotonic() + JOIN_TIMEOUT
    try:
        while len(results) + len(errors) < processes:
            try:
                name, status, value = out.get(timeout=0.5)
            except queue_module.Empty:
                crashed = [(p.name, p.exitcode) for p in procs if p.exitcode not in (None, 0)]
                if crashed:
                    pytest.fail(f"racing processes died without reporting: {crashed}")
                if time.monotonic() > deadline:
                    pytest.fail(f"racing processes never reported back: {sorted(results)} did")
                continue
            if status == "ok":
                results[name] = value
            else:
                errors.append(f"{name}:\n{value}")
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        out.close()
        out.join_thread()
    assert not errors, "\n".join(errors)
    assert sorted(results) == names
    return results


def test_processes_racing_for_one_lease_never_share_an_epoch(store_url: str, store: Store) -> None:
    results = race(store_url, _workers.claim_loop, 6, TEAM, 1.0, 0.02)
    grants = [grant for granted in results.values() for grant in granted]
    assert len(grants) >= 6, "too few grants to call this a race"
    holders_by_epoch: dict[int, set[str]] = {}
    for epoch, holder in grants:
        holders_by_epoch.setdefault(epoch, set()).add(holder)
    shared = {epoch: h for epoch, h in holders_by_epoch.items() if len(h) > 1}
    assert not shared, f"epochs granted to more than one holder: {shared}"
    assert len(holders_by_epoch) == len(grants), "an epoch was granted twice"
    # Each process saw its own epochs strictly increase.
    for granted in results.values():
        epochs = [epoch for epoch, _ in granted]
        assert epochs == sorted(epochs)
        assert len(set(epochs)) == len(epochs)
    # In the store's commit order, epochs strictly increase and match the grants.
    claimed = [
        (e.epoch, e.data.get("holder"))
        for e in store.events(TEAM, limit=1_000_000)
        if e.kind == "lease.claimed"
    ]
    claimed_epochs = [epoch for epoch, _ in claimed]
    assert all(a < b for a, b in zip(claimed_epochs, claimed_epochs[1:], strict=False))
    assert sorted(claimed) == sorted(grants)
    # Nothing else pushed the counter: every epoch from 1 up was granted once.
    assert sorted(holders_by_epoch) == list(range(1, len(grants) + 1))
    assert store.current_epoch(TEAM) == len(grants)
    assert len({holder for _, holder in grants}) > 1, "only one process ever won"


def test_processes_racing_one_transition_have_exactly_one_winner(
    store_url: str, store: Store
) -> None:
    epoch = store.claim_lease(TEAM, "leader", 60.0, token=LEASE_TOKEN).epoch
    task_ids = [f"t{n}" for n in range(30)]
    for task_id in task_ids:
        assert store.create_task(TEAM, task_id, epoch=epoch, spec={}).version == 1
    results = race(store_url, _workers.transition_each, 5, TEAM, task_ids, epoch)
    for task_id in task_ids:
        winners = [name for name, won in results.items() if task_id in won]
        assert len(winners) == 1, f"{task_id}: winners {winners}"
        record = store.get_task(TEAM, task_id)
        assert (record.state, record.assignee) == ("running", winners[0])
    moves = [e for e in store.events(TEAM, limit=10_000) if e.kind == "task.transition"]
    assert len(moves) == len(task_ids)


def test_processes_racing_compare_and_set_lose_no_update(store_url: str, store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 60.0, token=LEASE_TOKEN).epoch
    created = store.create_task(TEAM, "counter", epoch=epoch, spec={}, state="running")
    target = 60
    results = race(store_url, _workers.increment_loop, 4, TEAM, "counter", epoch, target)
    wins = [win for won in results.values() for win in won]
    final = store.get_task(TEAM, "counter")
    assert final.data["count"] == target
    assert len(wins) == target, "a write was lost or doubled"
    # Exactly one winner per version: the wins form one chain of versions.
    read_versions = Counter(read for read, _ in wins)
    assert max(read_versions.values()) == 1, "two writers won from the same version"
    chain = dict(wins)
    version = created.version
    for _ in range(target):
        version = chain[version]
    assert version == final.version


def test_processes_racing_one_effect_run_it_once(store_url: str, store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 60.0, token=LEASE_TOKEN).epoch
    keys = [f"t{n}:attempt-1" for n in range(25)]
    results = race(store_url, _workers.effect_keys, 5, TEAM, epoch, keys)
    for key in keys:
        runs = [name for name, seen in results.items() if seen[key][0] == "run"]
        assert len(runs) == 1, f"{key} ran in {runs}"
        expected = {"by": runs[0], "key": key}
        assert all(seen[key][1] == expected for seen in results.values())
        lookup = store.effect_lookup(TEAM, key)
        assert lookup is not None
        assert lookup.result == expected


def test_consumers_draining_one_queue_process_each_message_once(
    store_url: str, store: Store
) -> None:
    total = 150
    for n in range(total):
        store.send(TEAM, "work", {"n": n})
    results = race(store_url, _workers.drain, 4, TEAM, "work")
    seen = [n for got in results.values() for n in got]
    counts = Counter(seen)
    assert sorted(counts) == list(range(total)), "a message was never delivered"
    assert max(counts.values()) == 1, f"delivered twice: {[n for n, c in counts.items() if c > 1]}"
    assert sum(1 for got in results.values() if got) > 1, "only one consumer got work"
    assert store.receive(TEAM, "work", consumer="check", visibility_timeout=1.0) == []
    assert store.dead_letters(TEAM) == []


def test_processes_seizing_one_refused_lease_have_exactly_one_winner(
    store_url: str, store: Store
) -> None:
    forged = store.claim_lease(TEAM, "mallory", 60.0, token=LEASE_TOKEN)
    results = race(store_url, _workers.seize_once, 6, TEAM, forged.holder, forged.epoch)
    winners = {name: epoch for name, epoch in results.items() if epoch is not None}
    assert len(winners) == 1, f"more than one seized the lease: {winners}"
    [(name, epoch)] = winners.items()
    current = store.current_lease(TEAM)
    assert current is not None and (current.holder, current.epoch) == (name, forged.epoch + 1)
    assert epoch == forged.epoch + 1 == store.current_epoch(TEAM)
