"""Wake-up latency: how soon an idle member acts on a message, p50 and p99.

Two measurements, each on a fresh store with one worker process that is idle
(waiting) when the message comes:

    queue  enqueue -> start: ``enqueue_plan`` of a one-task plan, then the time from
           the envelope's ``message.sent`` to the task's transition to ``running``
           (the worker woke, claimed the key and marked it). The next task is
           enqueued only after this one is done and a short gap has passed.
    team   dispatch -> start, and result -> accepted: a leader in the bench process
           runs a plan of N no-op tasks with one ``tenure worker`` process. For each
           task: the envelope's ``message.sent`` to ``running`` (the worker woke), and
           the result's ``message.sent`` to the transition to ``done`` (the leader woke
           and accepted it).

All times are ``at`` of events on the store clock, so they include the store's
own writes on both sides. Usage:

    .venv/bin/python bench/latency.py                                  # SQLite, 50 tasks
    .venv/bin/python bench/latency.py --store redis://127.0.0.1:6379/14 --tasks 100
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import threading
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from _common import RunDir, Stores, all_events, bench_root, machine, unique_team
from tenure.console.processes import stop_all
from tenure.coord import LeaseTiming
from tenure.roles import Leader, LeaderConfig
from tenure.roles.teams.queue import enqueue_plan
from tenure.store import Event, open_store
from throughput import TTL, make_plan, ready, spawn_workers, team_keys

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
GAP = 0.03
"""Seconds between one queue task done and the next enqueued: the worker is waiting."""


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": p99 * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def queue_latency(url: str, run_dir: RunDir, tasks: int, timeout: float) -> list[float]:
    team = unique_team("lat-queue")
    keys = run_dir.path / "keys"
    lead = team_keys(keys, team, 1)
    procs = spawn_workers("queue", 1, url, team, run_dir, keys)
    latencies: list[float] = []
    try:
        with open_store(url) as store:
            ready("queue", store, team, procs, timeout, lead)
            for n in range(tasks):
                after = store.last_event_seq(team)
                enqueue_plan(store, make_plan(team, 1, prefix=f"lat{n:04d}-"), credentials=lead)
                task_id = f"lat{n:04d}-0001"
                deadline = time.monotonic() + timeout
                while store.get_task(team, task_id).state != "done":
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{task_id} not done after {timeout:g}s")
                    time.sleep(0.005)
                latencies.append(_sent_to_running(store.events(team, after=after), task_id))
                time.sleep(GAP)
    finally:
        stop_all(procs)
    return latencies


def _sent_to_running(events: list[Event], task_id: str) -> float:
    sent = next(e.at for e in events if e.kind == "message.sent" and e.data.get("queue") == "work")
    running = next(
        e.at
        for e in events
        if e.kind == "task.transition"
        and e.data.get("task_id") == task_id
        and e.data.get("to") == "running"
    )
    return running - sent


def team_latency(
    url: str, run_dir: RunDir, tasks: int, timeout: float
) -> tuple[list[float], list[float]]:
    team = unique_team("lat-team")
    keys = run_dir.path / "keys"
    lead = team_keys(keys, team, 1)
    procs = spawn_workers("team", 1, url, team, run_dir, keys)
    stop = threading.Event()
    timer = threading.Timer(timeout, stop.set)
    try:
        with open_store(url) as store:
            ready("team", store, team, procs, timeout, lead)
            config = LeaderConfig(
                team=team,
                member_id="leader",
                priority=100,
                timing=LeaseTiming(ttl=TTL),
                state_dir=run_dir.state,
                stale_grace=TTL,
                credentials=lead,
            )
            timer.start()
            if Leader(store, config, make_plan(team, tasks)).lead(stop) != "settled":
                raise TimeoutError(f"the team plan did not finish in {timeout:g}s")
            return _team_pairs(all_events(store, team))
    finally:
        timer.cancel()
        stop_all(procs)


def _team_pairs(events: list[Event]) -> tuple[list[float], list[float]]:
    """One worker: each assignment's send precedes its task's ``running``, each
    result's send precedes its task's ``done``."""
    start: list[float] = []
    accept: list[float] = []
    assigned = result = None
    for e in events:
        if e.kind == "message.sent" and e.data.get("type") == "task.assign":
            assigned = e.at
        elif e.kind == "message.sent" and e.data.get("type") == "task.result":
            result = e.at
        elif e.kind == "task.transition" and e.data.get("to") == "running" and assigned:
            start.append(e.at - assigned)
            assigned = None
        elif e.kind == "task.transition" and e.data.get("to") == "done" and result:
            accept.append(e.at - result)
            result = None
    return start, accept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50, help="tasks measured per mode")
    parser.add_argument("--modes", default="queue,team", help="comma-separated: queue, team")
    parser.add_argument("--store", default=None, help="redis://HOST:PORT/DB or a directory")
    parser.add_argument("--timeout", type=float, default=120.0, help="per mode, seconds")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    stores = Stores(args.store, False)
    root = bench_root(None)
    rows: dict[str, Any] = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        run_dir = RunDir(root, f"latency-{mode}")
        url = stores.url_for(run_dir.path, f"latency-{mode}")
        if mode == "queue":
            rows["queue enqueue->start"] = percentiles(
                queue_latency(url, run_dir, args.tasks, args.timeout)
            )
        elif mode == "team":
            start, accept = team_latency(url, run_dir, args.tasks, args.timeout)
            rows["team dispatch->start"] = percentiles(start)
            rows["team result->accepted"] = percentiles(accept)
        else:
            parser.error(f"--modes: unknown mode {mode!r}")
    shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"store": stores.kind, "machine": str(machine().line()), **rows}))
        return
    table = Table(title=f"wake-up latency, {stores.kind} store, one idle worker")
    for column in ("path", "n", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for path, row in rows.items():
        cells = [row[k] for k in ("p50_ms", "p99_ms", "max_ms")]
        table.add_row(path, str(row["n"]), *("—" if c is None else f"{c:.1f}" for c in cells))
    console.print(machine().line())
    console.print(table)


if __name__ == "__main__":
    main()
