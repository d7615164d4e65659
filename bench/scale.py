"""Leader scale: one flat leader over 10, 100, 1,000 followers, then the same work
through a tree of sub-teams.

    .venv/bin/python bench/scale.py                      # short: 10 and 100, tree 2x50
    .venv/bin/python bench/scale.py --quick              # smoke: flat 5, tree 2x5
    .venv/bin/python bench/scale.py --sizes 1000 --tree 10x100 --rounds 3   # flat 1x1,000 and tree 10x100

Every member is real: the leader is ``roles.Leader`` with its ``Conductor``, the
followers are ``roles.Follower`` objects running the no-op executor through the
whole follower path (fenced running mark, effect claim, result), all on one real
store (a fresh SQLite file unless ``--store``). Followers are *simulated* only in
that one OS process drives up to 100 of them: it polls their queues in turn and
heartbeats them in bulk, instead of 100 processes with two threads each.

Flat: the leader runs in this process; its thread's CPU time
(``time.thread_time``) divided by the tasks is "leader CPU per task". Each
conductor round is timed ("round ms"): a round reads the register and the
members, drains results and dispatches, so a worker that finishes waits about
one round for its next task. "idle wait" is exactly that, per task: from the
acceptance of the worker's previous task to the dispatch of its next one.

Tree: a parent team whose plan has K composite tasks; each is taken by a
sub-leader process (``roles.subteam.sub_leader``: a follower of the parent that
leads the child team ``<parent>/s<i>``) over M simulated followers, the same
total number of no-op tasks split K ways. Each sub-leader process reports its
CPU time and rounds. This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tenure.coord import LeaseTiming
from tenure.executors import resolve_executor
from tenure.protocol import Plan
from tenure.protocol.errors import NotFound
from tenure.roles import Follower, FollowerConfig, Leader, LeaderConfig
from tenure.roles.leader import candidate as leader_module
from tenure.roles.leader.conductor import Conductor
from tenure.roles.member.wire import WORK_CAPABILITY
from tenure.roles.teams import sub_leader
from tenure.store import Store, open_store

MEMBER_TTL = 15.0  # simulated followers heartbeat in bulk every third of it
PER_PROCESS = 100  # simulated followers per OS process
TIMING = LeaseTiming(ttl=10.0)


# --- timing the conductor --------------------------------------------------------------


class TimedConductor(Conductor):
    rounds: list[float] = []

    def tick(self, wait: float = 0.0) -> bool:
        started = time.perf_counter()
        busy = super().tick(wait=wait)
        if busy:
            TimedConductor.rounds.append(time.perf_counter() - started)
        return busy


def timed_leaders() -> None:
    TimedConductor.rounds = []  # a forked process starts with its own list
    setattr(leader_module, "Conductor", TimedConductor)  # noqa: B010


# --- simulated followers -----------------------------------------------------------------


def swarm(url: str, team: str, ids: list[str], stop: Any) -> None:
    """Drive ``ids`` as followers of ``team`` from one process until ``stop`` is set."""
    store = open_store(url)
    noop = resolve_executor("noop")
    followers = [
        Follower(store, FollowerConfig(team=team, member_id=i, member_ttl=MEMBER_TTL), noop)
        for i in ids
    ]
    for f in followers:
        store.join(team, f.me, ttl=MEMBER_TTL, capabilities=(WORK_CAPABILITY,))
    last_beat = time.monotonic()
    try:
        while not stop.is_set():
            busy = False
            for f in followers:
                busy |= f.poll_once()
                if time.monotonic() - last_beat > MEMBER_TTL / 3:
                    beat(store, team, followers)
                    last_beat = time.monotonic()
            if not busy:
                time.sleep(0.005)
    finally:
        store.close()


def beat(store: Store, team: str, followers: list[Follower]) -> None:
    for f in followers:
        try:
            store.heartbeat(team, f.me, ttl=MEMBER_TTL, highest_epoch=f.memory.highest)
        except NotFound:  # a round took longer than the TTL: join again
            store.join(
                team,
                f.me,
                ttl=MEMBER_TTL,
                capabilities=(WORK_CAPABILITY,),
                highest_epoch=f.memory.highest,
            )


def start_swarms(url: str, team: str, size: int, stop: Any, prefix: str = "f") -> list[Any]:
    ids = [f"{prefix}{n:04d}" for n in range(size)]
    procs = []
    for start in range(0, size, PER_PROCESS):
        proc = multiprocessing.Process(
            target=swarm, args=(url, team, ids[start : start + PER_PROCESS], stop), daemon=True
        )
        proc.start()
        procs.append(proc)
    return procs


def wait_members(store: Store, team: str, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(store.members(team)) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{team}: only {len(store.members(team))} of {count} members joined")
        time.sleep(0.05)


# --- a leader, measured ------------------------------------------------------------------


def run_leader(store: Store, plan: Plan, member: str = "leader") -> tuple[float, float]:
    """Lead ``plan`` to the end in a thread; (wall seconds, leader-thread CPU seconds)."""
    measured: dict[str, float] = {}
    leader = Leader(
        store,
        LeaderConfig(
            team=plan.team,
            member_id=member,
            timing=TIMING,
            elect=False,
            poll_interval=0.01,
            stale_grace=60.0,
        ),
        plan,
    )

    def body() -> None:
        cpu = time.thread_time()
        outcome = leader.lead(threading.Event())
        measured["cpu"] = time.thread_time() - cpu
        measured["ok"] = float(outcome == "settled")

    started = time.perf_counter()
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return time.perf_counter() - started, measured["cpu"]


def idle_waits(store: Store, team: str) -> list[float]:
    """Per task: from its worker's previous acceptance to this dispatch."""
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for task in store.tasks(team):
        if task.state == "done" and task.assignee:
            at = float(task.data.get("dispatched_at", task.updated_at))
            by_worker.setdefault(task.assignee, []).append((at, task.updated_at))
    waits = []
    for runs in by_worker.values():
        runs.sort()
        waits += [nxt[0] - prev[1] for prev, nxt in zip(runs, runs[1:], strict=False)]
    return [max(0.0, w) for w in waits]


def noop_tasks(count: int, prefix: str = "t") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{n:05d}", "goal": "nothing"} for n in range(count)]


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- flat and tree runs ----------------------------------------------------------------


def flat(url: str, followers: int, tasks: int) -> dict[str, Any]:
    team = f"bench/flat{followers}-{uuid.uuid4().hex[:6]}"
    stop = multiprocessing.Event()
    store = open_store(url)
    procs = start_swarms(url, team, followers, stop)
    try:
        wait_members(store, team, followers)
        plan = Plan.model_validate({"team": team, "tasks": noop_tasks(tasks)})
        TimedConductor.rounds = []
        wall, cpu = run_leader(store, plan)
        rounds = list(TimedConductor.rounds)
        waits = idle_waits(store, team)
        done = sum(t.state == "done" for t in store.tasks(team))
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=10)
        store.close()
    return {
        "shape": f"flat 1x{followers}",
        "followers": followers,
        "tasks": tasks,
        "done": done,
        "wall_s": round(wall, 2),
        "tasks_per_s": round(done / wall, 1),
        "leader_cpu_ms_per_task": round(1000 * cpu / tasks, 2),
        "busiest_leader_cpu_s": round(cpu, 2),
        "round_ms_p50": round(1000 * statistics.median(rounds), 2) if rounds else 0.0,
        "round_ms_p99": round(1000 * pct(rounds, 0.99), 2),
        "idle_wait_ms_p50": round(1000 * pct(waits, 0.5), 1),
        "idle_wait_ms_p99": round(1000 * pct(waits, 0.99), 1),
    }


def sub_leader_process(url: str, parent: str, member: str, stop: Any, out: Any) -> None:
    timed_leaders()
    store = open_store(url)
    follower = sub_leader(
        store,
        FollowerConfig(team=parent, member_id=member, member_ttl=MEMBER_TTL, poll_interval=0.01),
        resolve_executor("noop"),
        timing=TIMING,
    )
    thread = threading.Thread(target=follower.run, args=(stop,), daemon=True)
    thread.start()
    while not stop.is_set():
        time.sleep(0.05)
    thread.join(timeout=10)
    out.put({"member": member, "cpu": time.process_time(), "rounds": TimedConductor.rounds})
    store.close()


def tree(url: str, teams: int, per_team: int, tasks: int) -> dict[str, Any]:
    parent = f"bench/tree{teams}x{per_team}-{uuid.uuid4().hex[:6]}"
    each = tasks // teams
    plan = Plan.model_validate(
        {
            "team": parent,
            "tasks": [
                {
                    "id": f"s{i}",
                    "goal": "lead a sub-team",
                    "deadline_seconds": 3600,
                    "team": {"tasks": noop_tasks(each)},
                }
                for i in range(teams)
            ],
        }
    )
    stop = multiprocessing.Event()
    out: Any = multiprocessing.Queue()
    store = open_store(url)
    procs = []
    for i in range(teams):
        procs += start_swarms(url, f"{parent}/s{i}", per_team, stop, prefix=f"s{i}f")
        proc = multiprocessing.Process(
            target=sub_leader_process, args=(url, parent, f"sub{i}", stop, out), daemon=True
        )
        proc.start()
        procs.append(proc)
    try:
        for i in range(teams):
            wait_members(store, f"{parent}/s{i}", per_team)
        wait_members(store, parent, teams)
        TimedConductor.rounds = []
        wall, top_cpu = run_leader(store, plan, "top")
        child_tasks = [t for i in range(teams) for t in store.tasks(f"{parent}/s{i}")]
        done = sum(t.state == "done" for t in child_tasks)
        waits = [w for i in range(teams) for w in idle_waits(store, f"{parent}/s{i}")]
    finally:
        stop.set()
        reports = [out.get(timeout=30) for _ in range(teams)]
        for proc in procs:
            proc.join(timeout=10)
        store.close()
    rounds = [r for rep in reports for r in rep["rounds"]]
    busiest = max(rep["cpu"] for rep in reports)
    total_cpu = top_cpu + sum(rep["cpu"] for rep in reports)
    return {
        "shape": f"tree {teams}x{per_team}",
        "followers": teams * per_team,
        "tasks": each * teams,
        "done": done,
        "wall_s": round(wall, 2),
        "tasks_per_s": round(done / wall, 1),
        "leader_cpu_ms_per_task": round(1000 * total_cpu / (each * teams), 2),
        "busiest_leader_cpu_s": round(max(busiest, top_cpu), 2),
        "round_ms_p50": round(1000 * statistics.median(rounds), 2) if rounds else 0.0,
        "round_ms_p99": round(1000 * pct(rounds, 0.99), 2),
        "idle_wait_ms_p50": round(1000 * pct(waits, 0.5), 1),
        "idle_wait_ms_p99": round(1000 * pct(waits, 0.99), 1),
    }


SHAPE_KEYS = (
    "wall_s", "tasks_per_s", "leader_cpu_ms_per_task", "busiest_leader_cpu_s",
    "round_ms_p50", "round_ms_p99", "idle_wait_ms_p50", "idle_wait_ms_p99",
)  # fmt: skip
RESULTS = Path(__file__).resolve().parent / "results"


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape: the median of each figure over rounds, with its range."""
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        runs = [r for r in rows if r["shape"] == shape]
        row: dict[str, Any] = {
            "shape": shape,
            "followers": runs[0]["followers"],
            "tasks": runs[0]["tasks"],
            "rounds": len(runs),
            "all_done": all(r["done"] == r["tasks"] for r in runs),
        }
        for key in SHAPE_KEYS:
            values = [float(r[key]) for r in runs]
            row[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        out.append(row)
    return out


def render(summary: list[dict[str, Any]], url: str) -> None:
    table = Table(
        title=f"leader scale on {url.split('://')[0]} ({os.cpu_count()} CPUs), "
        "median of rounds (min-max)"
    )
    for col in ("shape", "followers", "tasks", *SHAPE_KEYS):
        table.add_column(col, justify="left" if col == "shape" else "right")
    for row in summary:
        cells = [row["shape"], str(row["followers"]), str(row["tasks"])]
        for key in SHAPE_KEYS:
            v = row[key]
            cells.append(
                f"{v['median']:g}"
                if row["rounds"] == 1
                else f"{v['median']:g} ({v['min']:g}-{v['max']:g})"
            )
        table.add_row(*cells)
    Console(width=None if sys.stdout.isatty() else 180).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", help="store URL (default: a fresh SQLite file per run)")
    parser.add_argument("--sizes", default="10,100", help="flat team sizes, comma-separated")
    parser.add_argument(
        "--tree", default="2x50", help="KxM: K sub-teams of M followers ('' for none)"
    )
    parser.add_argument("--tasks-per-follower", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="each shape once per round")
    parser.add_argument(
        "--quick", action="store_true", help="smoke sizes: flat 5, tree 2x5, 1 task each"
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON object per run")
    parser.add_argument(
        "--out", type=Path, help=f"where the JSON file goes (default: {RESULTS}/...)"
    )
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.tree, args.tasks_per_follower, args.rounds = "5", "2x5", 1, 1
    if args.rounds < 1 or args.tasks_per_follower < 1:
        parser.error("--rounds and --tasks-per-follower must be >= 1")
    out = args.out or RESULTS / f"scale-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    timed_leaders()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    shapes: list[Any] = [("flat", size) for size in sizes]
    if args.tree:
        k, m = (int(x) for x in args.tree.lower().split("x"))
        shapes.append(("tree", (k, m)))
    rows: list[dict[str, Any]] = []
    urls = []
    for rnd in range(1, args.rounds + 1):
        for kind, size in shapes if rnd % 2 else list(reversed(shapes)):
            url = args.store or f"sqlite:///{Path(tempfile.mkdtemp()) / 'scale.db'}"
            urls.append(url)
            if kind == "flat":
                row = flat(url, size, size * args.tasks_per_follower)
            else:
                k, m = size
                row = tree(url, k, m, k * m * args.tasks_per_follower)
            row["round"] = rnd
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"round {rnd} {row['shape']}: {row['tasks_per_s']} tasks/s", flush=True)
    summary = summarize(rows)
    render(summary, urls[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "scale",
                "command": " ".join([".venv/bin/python", "bench/scale.py", *sys.argv[1:]]),
                "store": urls[0].split("://")[0],
                "loadavg_at_end": os.getloadavg(),
                "summary": summary,
                "runs": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"JSON written to {out}")


if __name__ == "__main__":
    main()
