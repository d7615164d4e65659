"""Dispatch latency: how long a task waits to be picked up, and how long its result
waits to be accepted, in queue and team mode, on SQLite and on Redis.

    .venv/bin/python bench/dispatch_latency.py                       # 100 tasks, both modes, both stores
    .venv/bin/python bench/dispatch_latency.py --quick               # 10 tasks
    .venv/bin/python bench/dispatch_latency.py --modes team --stores redis --redis redis://127.0.0.1:6379/14

Every time is read from the store's event log (the ``at`` of each event, on the
store clock), so no clock of the bench enters a figure:

- **enqueue -> running**: queue mode, from the ``message.sent`` of the task's
  envelope (``enqueue_plan``) to the worker's ``task.transition`` to running;
  team mode, from the leader's ``task.dispatched`` to that transition.
- **result -> accepted**: from the worker's ``effect.done`` of the attempt (the
  work is over and its result recorded) to the ``task.transition`` to done
  (queue mode: the worker's own verdict; team mode: the leader's review).

Latency, not throughput: queue mode sends one task at a time and the next only
after the last is done, with a random 0-20 ms pause, so a worker always waits
idle; team mode gives the leader a plan and one worker (``--workers``), so each
task is dispatched as soon as the worker is free. The first ``--workers`` tasks
of a run are left out (warm-up). Members sign, as ``tenure run`` does. On Redis
each run takes a team of its own in the given database (nothing is flushed).
JSON goes to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from _common import (
    RunDir,
    Stores,
    all_events,
    check_alive,
    machine,
    report_end,
    spawn_member,
    unique_team,
    wait_for,
)
from tenure.console.processes import stop_all
from tenure.coord import LeaseTiming
from tenure.coord.credentials import Credentials, init_team
from tenure.protocol import Plan, PlanTask
from tenure.roles import Leader, LeaderConfig
from tenure.roles.teams.queue import enqueue_plan
from tenure.store import Event, Store, open_store

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("queue", "team")
STORES = ("sqlite", "redis")


def plan_of(team: str, ids: list[str]) -> Plan:
    return Plan(team=team, tasks=[PlanTask(id=i, goal="noop") for i in ids])


def spawn_workers(
    mode: str, n: int, url: str, team: str, run: RunDir, keys: Path
) -> dict[str, Any]:
    flags = ["--queue"] if mode == "queue" else []
    return {
        f"w{i}": spawn_member(
            [
                "worker",
                "--team",
                team,
                "--exec",
                "noop",
                "--member",
                f"w{i}",
                "--keys",
                str(keys),
                "--state-dir",
                str(run.state),
                *flags,
            ],
            run.log(f"w{i}"),
            url,
        )  # fmt: skip
        for i in range(n)
    }


def run_queue(store: Store, team: str, tasks: int, lead: Credentials, procs: Any) -> None:
    """One task at a time, each after the previous one is done."""
    for i in range(tasks):
        task_id = f"q{i:04d}"
        enqueue_plan(store, plan_of(team, [task_id]), credentials=lead)
        wait_for(
            f"task {task_id} done",
            lambda t=task_id: store.get_task(team, t).state == "done",
            timeout=60.0,
            interval=0.002,
            procs=procs,
        )
        time.sleep(random.uniform(0.0, 0.02))


def run_team(store: Store, team: str, tasks: int, lead: Credentials, procs: Any) -> None:
    wait_for(
        "the workers to join",
        lambda: set(procs) <= {m.member_id for m in store.members(team)},
        timeout=60.0,
        procs=procs,
    )
    config = LeaderConfig(
        team=team,
        member_id="leader",
        priority=100,
        timing=LeaseTiming(ttl=3.0),
        stale_grace=3.0,
        credentials=lead,
    )
    stop = threading.Event()
    outcome: list[str] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            Leader(store, config, plan_of(team, [f"t{i:04d}" for i in range(tasks)])).lead(stop)
        ),
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 60.0 + tasks
    while thread.is_alive():
        check_alive(procs)
        if time.monotonic() > deadline:
            stop.set()
            raise TimeoutError("the leader did not finish the plan")
        thread.join(0.2)
    if outcome != ["settled"]:
        raise RuntimeError(f"the leader ended {outcome}")


def latencies(events: list[Event], mode: str) -> dict[str, dict[str, float]]:
    """Per task: enqueued, running, result, accepted (store clock)."""
    marks: dict[str, dict[str, float]] = {}
    last_created = ""
    for e in events:
        data = e.data
        task_id = str(data.get("task_id", ""))
        if e.kind == "task.created":
            last_created = task_id
        elif e.kind == "message.sent" and mode == "queue" and data.get("type") == "task.assign":
            marks.setdefault(last_created, {}).setdefault("enqueued", e.at)
        elif e.kind == "task.dispatched" and mode == "team":
            marks.setdefault(task_id, {})["enqueued"] = e.at
        elif e.kind == "task.transition" and data.get("to") in ("running", "done"):
            key = "running" if data["to"] == "running" else "accepted"
            marks.setdefault(task_id, {})[key] = e.at
        elif e.kind == "effect.done":
            owner = str(data.get("key", "")).split(":", 1)[0]
            marks.setdefault(owner, {})["result"] = e.at
    return marks


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_run(mode: str, kind: str, args: argparse.Namespace, root: Path, rnd: int) -> dict[str, Any]:
    label = f"{mode}-{kind}-r{rnd}"
    run = RunDir(root, label)
    stores = Stores(args.redis if kind == "redis" else None)
    url = stores.url_for(run.path, label)
    team = unique_team(f"lat-{mode}")
    keys = run.path / "keys"
    init_team(keys, team, [f"w{i}" for i in range(args.workers)])
    lead = Credentials.load(keys, team, "leader", "lead")
    procs: dict[str, Any] = {}
    record: dict[str, Any] = {"mode": mode, "store": kind, "round": rnd}
    try:
        with open_store(url) as store:
            procs = spawn_workers(mode, args.workers, url, team, run, keys)
            tasks = args.tasks + args.workers
            (run_queue if mode == "queue" else run_team)(store, team, tasks, lead, procs)
            marks = latencies(all_events(store, team), mode)
    except (TimeoutError, RuntimeError) as exc:
        record["error"] = str(exc)
        return record
    finally:
        stop_all(list(procs.values()))
    ordered = sorted((m for m in marks.values() if len(m) == 4), key=lambda m: m["enqueued"])[
        args.workers :
    ]
    pick = [1000 * (m["running"] - m["enqueued"]) for m in ordered]
    accept = [1000 * (m["accepted"] - m["result"]) for m in ordered]
    record.update(
        tasks=len(ordered),
        enqueue_to_running_ms=pick,
        result_to_accepted_ms=accept,
    )
    if not args.keep:
        run.remove()
    return record


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for mode in MODES:
        for kind in STORES:
            cell = [r for r in runs if (r["mode"], r["store"]) == (mode, kind)]
            if not cell:
                continue
            ok = [r for r in cell if "error" not in r]
            row: dict[str, Any] = {"mode": mode, "store": kind, "runs": len(cell), "ok": len(ok)}
            for name in ("enqueue_to_running_ms", "result_to_accepted_ms"):
                pooled = [v for r in ok for v in r[name]]
                p50s = [percentile(r[name], 0.5) for r in ok if r[name]]
                row[name] = {
                    "p50": percentile(pooled, 0.5),
                    "p99": percentile(pooled, 0.99),
                    "p50_min": min(p50s, default=None),
                    "p50_max": max(p50s, default=None),
                    "samples": len(pooled),
                }
            rows.append(row)
    return rows


def render(rows: list[dict[str, Any]], rounds: int) -> None:
    table = Table(
        title=f"dispatch latency, ms (pooled over {rounds} round(s); p50 range of rounds)"
    )
    for col in ("mode", "store", "tasks", "enqueue->running p50", "range", "p99",
                "result->accepted p50", "range", "p99"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("mode", "store") else "right")
    for row in rows:
        pick, acc = row["enqueue_to_running_ms"], row["result_to_accepted_ms"]
        table.add_row(
            row["mode"],
            row["store"],
            str(pick["samples"]),
            _f(pick["p50"]),
            f"{_f(pick['p50_min'])}-{_f(pick['p50_max'])}",
            _f(pick["p99"]),
            _f(acc["p50"]),
            f"{_f(acc['p50_min'])}-{_f(acc['p50_max'])}",
            _f(acc["p99"]),
        )
    console.print(table)


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=100, help="measured tasks per run")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--stores", nargs="+", default=list(STORES), choices=STORES)
    parser.add_argument(
        "--redis", default="redis://127.0.0.1:6379/14", help="Redis database for --stores redis"
    )
    parser.add_argument("--quick", action="store_true", help="smoke sizes: 10 tasks, 1 round")
    parser.add_argument("--json", type=Path, help=f"where the JSON goes (default: {RESULTS}/...)")
    parser.add_argument("--keep", type=Path, help="keep each run's logs and store here")
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.rounds = 10, 1
    if min(args.tasks, args.workers, args.rounds) < 1:
        parser.error("--tasks, --workers and --rounds must be >= 1")
    if args.json is None:
        args.json = (
            RESULTS / f"dispatch-latency-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
        )
    host = machine()
    console.print(host.line())
    root = args.keep or Path(tempfile.mkdtemp(prefix="tenure-latency-"))
    started = time.monotonic()
    runs = []
    cells = [(m, k) for m in args.modes for k in args.stores]
    for rnd in range(1, args.rounds + 1):
        for mode, kind in cells if rnd % 2 else list(reversed(cells)):
            record = one_run(mode, kind, args, Path(root), rnd)
            runs.append(record)
            if "error" in record:
                console.print(f"[red]round {rnd} {mode} {kind}: {record['error']}[/]")
            else:
                console.print(
                    f"round {rnd} {mode:5} {kind:6} enqueue->running p50 "
                    f"{_f(percentile(record['enqueue_to_running_ms'], 0.5))} ms, result->accepted "
                    f"p50 {_f(percentile(record['result_to_accepted_ms'], 0.5))} ms"
                )
    rows = summarize(runs)
    render(rows, args.rounds)
    report_end(
        console,
        started,
        args,
        benchmark="dispatch_latency",
        host=host,
        store_kind=",".join(args.stores),
        results={"summary": rows, "runs": runs},
    )
    console.print(f"JSON written to {args.json}")
    return 0 if all("error" not in r for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
