"""End-to-end throughput of no-op tasks: local, team and queue mode, 1/2/4 workers.

Each cell (mode, workers) runs a plan of N ``noop`` tasks on a fresh store:

    local  ``LocalTeam``: leader and workers as threads of the bench process
           (what ``tenure run --mode local`` runs).
    team   workers are ``tenure worker`` processes; the leader runs in the bench
           process with the configuration ``tenure run --mode team`` gives it.
    queue  workers are ``tenure worker --queue`` processes; the bench process
           enqueues the plan (``enqueue_plan``), as ``tenure run --mode queue`` does.

Worker start-up is kept out of the figure: the workers are started first and the
clock starts only once every one of them is ready (team: joined the team; queue:
executed a warm-up task, since queue workers do not join). The start-up time is
reported next to it. The measured interval, on the store clock, runs from just
before the plan is handed over (registered, or enqueued) to the last task's
``done`` transition. Cells alternate within each round (the order is reversed
every other round); figures are medians over rounds.

Team and queue mode sign by default, as ``tenure run`` does: each cell makes a key
directory for its team (``init_team``), the leader (team) or the enqueuer (queue)
signs with the lead key and every worker with its own. ``--signing both`` runs each
team/queue cell signed and ``--insecure`` in the same round and prints the ratio
signed/unsigned (local mode has no keys and runs once). Usage:

    .venv/bin/python bench/throughput.py                       # 200 tasks, 3 rounds
    .venv/bin/python bench/throughput.py --modes team --workers 1,2 --rounds 1
    .venv/bin/python bench/throughput.py --store redis://127.0.0.1:6379/14 --flush
    .venv/bin/python bench/throughput.py --modes team,queue --signing both  # the cost of keys
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from _common import (
    RunDir,
    Stores,
    all_events,
    bench_root,
    check_alive,
    fmt,
    is_transition,
    machine,
    median,
    report_end,
    spawn_member,
    unique_team,
    wait_for,
)
from tenure.console.processes import stop_all
from tenure.coord import LeaseTiming
from tenure.coord.credentials import Credentials, init_team
from tenure.executors.scripted import NoopExecutor
from tenure.protocol import Plan, PlanTask
from tenure.roles import Leader, LeaderConfig
from tenure.roles.teams.local import LocalTeam
from tenure.roles.teams.queue import enqueue_plan
from tenure.store import Store, open_store

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
MODES = ("local", "team", "queue")
OPEN_STATES = ("queued", "running", "review")
TTL = 3.0  # the `tenure run` default


@dataclass
class Sample:
    mode: str
    workers: int
    round: int
    tasks: int
    signed: bool = False
    ok: bool = False
    error: str = ""
    startup: float | None = None  # spawn -> every worker ready (monotonic clock)
    elapsed: float | None = None  # plan handed over -> last task done (store clock)
    throughput: float | None = None  # tasks / elapsed
    states: dict[str, int] = field(default_factory=dict)
    load1: float = 0.0  # 1-minute load average when the cell started


def make_plan(team: str, tasks: int, prefix: str = "t") -> Plan:
    return Plan(
        team=team,
        goal="throughput benchmark",
        tasks=[PlanTask(id=f"{prefix}{i:04d}", goal="noop") for i in range(1, tasks + 1)],
    )


def one_cell(
    cell: tuple[str, int, bool], rnd: int, args: argparse.Namespace, stores: Stores, root: Path
) -> Sample:
    mode, workers, signed = cell
    label = f"{mode}-w{workers}-{'signed' if signed else 'insecure'}-r{rnd}"
    run_dir = RunDir(root, label)
    team = unique_team(f"tp-{mode}")
    url = stores.url_for(run_dir.path, label)
    plan = make_plan(team, args.tasks)
    sample = Sample(mode, workers, rnd, args.tasks, signed, load1=os.getloadavg()[0])
    keys = run_dir.path / "keys" if signed else None
    lead = team_keys(keys, team, workers) if keys is not None else None
    procs: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    watchdog = Watchdog(stop, args.timeout)
    try:
        with open_store(url) as store:
            if mode != "local":
                started = time.monotonic()
                procs = spawn_workers(mode, workers, url, team, run_dir, keys)
                ready(mode, store, team, procs, args.timeout, lead)
                sample.startup = time.monotonic() - started
            watchdog.start(procs)
            t0 = store.now()
            if mode == "local":
                outcome = LocalTeam(
                    store,
                    plan,
                    NoopExecutor(),
                    workers=workers,
                    timing=LeaseTiming(ttl=TTL),
                    state_dir=run_dir.state,
                ).run(stop)
            elif mode == "team":
                config = LeaderConfig(
                    team=team,
                    member_id="leader",
                    priority=100,
                    timing=LeaseTiming(ttl=TTL),
                    state_dir=run_dir.state,
                    stale_grace=TTL,
                    credentials=lead,
                )
                outcome = Leader(store, config, plan).lead(stop)
            else:
                enqueue_plan(store, plan, credentials=lead)
                outcome = settle(store, team, stop)
            if outcome != "settled":
                raise RuntimeError(watchdog.why or f"ended {outcome}")
            measure(sample, store, plan, t0)
    except (TimeoutError, RuntimeError) as exc:
        sample.error = str(exc)
    finally:
        watchdog.cancel()
        stop_all(procs)
    if sample.ok and args.keep is None:
        run_dir.remove()
    return sample


class Watchdog:
    """Sets ``stop`` when the cell runs past its timeout or a worker process exits."""

    def __init__(self, stop: threading.Event, timeout: float) -> None:
        self.stop = stop
        self.timeout = timeout
        self.why = ""
        self._done = threading.Event()

    def start(self, procs: list[subprocess.Popen[bytes]]) -> None:
        named = {f"worker-{n}": p for n, p in enumerate(procs, start=1)}
        threading.Thread(target=self._run, args=(named,), daemon=True).start()

    def cancel(self) -> None:
        self._done.set()

    def _run(self, procs: dict[str, subprocess.Popen[bytes]]) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._done.wait(0.2):
            try:
                check_alive(procs)
            except RuntimeError as exc:
                self.why = str(exc)
            if not self.why and time.monotonic() > deadline:
                self.why = f"not finished after {self.timeout:g}s"
            if self.why:
                self.stop.set()
                return


def team_keys(keys: Path, team: str, workers: int) -> Credentials:
    """Keys for the team and each worker, as ``tenure run`` makes them; the lead's."""
    init_team(keys, team, [f"worker-{n}" for n in range(1, workers + 1)])
    return Credentials.load(keys, team, "leader", "lead")


def spawn_workers(
    mode: str, workers: int, url: str, team: str, run_dir: RunDir, keys: Path | None
) -> list[subprocess.Popen[bytes]]:
    extra = ["--queue"] if mode == "queue" else []
    extra += ["--keys", str(keys)] if keys is not None else ["--insecure"]
    common = ["--team", team, "--exec", "noop", "--state-dir", str(run_dir.state)]
    return [
        spawn_member(
            ["worker", *common, "--member", f"worker-{n}", *extra], run_dir.log(f"w{n}"), url
        )
        for n in range(1, workers + 1)
    ]


def ready(
    mode: str,
    store: Store,
    team: str,
    procs: list[subprocess.Popen[bytes]],
    timeout: float,
    lead: Credentials | None,
) -> None:
    workers = len(procs)
    named = {f"worker-{n}": p for n, p in enumerate(procs, start=1)}
    wanted = set(named)
    if mode == "team":
        wait_for(
            f"{workers} workers to join",
            lambda: wanted <= {m.member_id for m in store.members(team)},
            timeout=timeout,
            procs=named,
        )
        return
    # Queue workers do not join: keep the queue topped up with warm-up tasks until
    # each worker has executed one, then let the warm-up drain.
    deadline = time.monotonic() + timeout
    made = 0
    while True:
        check_alive(named)
        warm = [t for t in store.tasks(team) if t.task_id.startswith("warm")]
        if wanted <= {t.assignee for t in warm}:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"queue workers not all ready after {timeout:g}s")
        if sum(t.state in OPEN_STATES for t in warm) < workers:
            made += 1
            enqueue_plan(store, make_plan(team, 1, prefix=f"warm{made:03d}-"), credentials=lead)
        time.sleep(0.02)
    wait_for(
        "the warm-up to drain",
        lambda: all(
            t.state not in OPEN_STATES for t in store.tasks(team) if t.task_id.startswith("warm")
        ),
        timeout=timeout,
        procs=named,
    )


def settle(store: Store, team: str, stop: threading.Event) -> str:
    while not stop.is_set():
        if all(t.state not in OPEN_STATES for t in store.tasks(team)):
            return "settled"
        stop.wait(0.1)
    return "stopped"


def measure(sample: Sample, store: Store, plan: Plan, t0: float) -> None:
    ids = {t.id for t in plan.tasks}
    states = Counter(t.state for t in store.tasks(plan.team) if t.task_id in ids)
    sample.states = dict(states)
    done_at = [
        e.at
        for e in all_events(store, plan.team)
        if is_transition(e, "done") and e.data.get("task_id") in ids
    ]
    if states.get("done", 0) != len(ids) or len(done_at) != len(ids):
        raise RuntimeError(f"not every task done: {dict(states)}")
    sample.elapsed = max(done_at) - t0
    sample.throughput = len(ids) / sample.elapsed
    sample.ok = True


def summarize(samples: list[Sample]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cells = sorted(
        {(s.mode, s.workers, s.signed) for s in samples},
        key=lambda c: (MODES.index(c[0]), c[1], not c[2]),
    )
    for mode, workers, signed in cells:
        cell = [s for s in samples if (s.mode, s.workers, s.signed) == (mode, workers, signed)]
        ok = [s for s in cell if s.ok]
        rates = [s.throughput for s in ok if s.throughput is not None]
        rows.append(
            {
                "mode": mode,
                "workers": workers,
                "signed": signed,
                "runs": len(cell),
                "ok": len(ok),
                "tasks_per_s": median(rates),
                "tasks_per_s_min": min(rates) if rates else None,
                "tasks_per_s_max": max(rates) if rates else None,
                "elapsed_s": median([s.elapsed for s in ok if s.elapsed is not None]),
                "ms_per_task": 1000 / statistics.median(rates) if rates else None,
                "startup_s": median([s.startup for s in ok if s.startup is not None]),
            }
        )
    return rows


def signing_ratios(samples: list[Sample]) -> list[dict[str, Any]]:
    """Signed over unsigned throughput for each (mode, workers), from runs of the same
    round (a pair shares the machine's mood); the median over rounds."""
    ratios: list[dict[str, Any]] = []
    for mode, workers in sorted({(s.mode, s.workers) for s in samples if s.signed}):
        pairs = []
        for rnd in sorted({s.round for s in samples}):
            by_kind = {
                s.signed: s.throughput
                for s in samples
                if (s.mode, s.workers, s.round) == (mode, workers, rnd) and s.ok
            }
            signed, unsigned = by_kind.get(True), by_kind.get(False)
            if signed and unsigned:
                pairs.append(signed / unsigned)
        ratios.append({"mode": mode, "workers": workers, "ratio": median(pairs), "pairs": pairs})
    return ratios


def print_summary(
    rows: list[dict[str, Any]], ratios: list[dict[str, Any]], tasks: int, rounds: int, kind: str
) -> None:
    table = Table(title=f"{tasks} no-op tasks per cell, median of {rounds} round(s), {kind} store")
    columns = (
        "mode",
        "workers",
        "keys",
        "tasks/s",
        "min-max",
        "elapsed s",
        "ms/task",
        "start-up s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("mode", "keys") else "right")
    for row in rows:
        table.add_row(
            str(row["mode"]),
            str(row["workers"]),
            "signed" if row["signed"] else "-",
            f"[bold]{fmt(row['tasks_per_s'], 1)}[/]",
            f"{fmt(row['tasks_per_s_min'], 1)}-{fmt(row['tasks_per_s_max'], 1)}",
            fmt(row["elapsed_s"]),
            fmt(row["ms_per_task"], 1),
            fmt(row["startup_s"]),
        )
    console.print(table)
    for ratio in ratios:
        pairs = ", ".join(f"{r:.2f}" for r in ratio["pairs"])
        console.print(
            f"signed/unsigned {ratio['mode']} x{ratio['workers']}: "
            f"[bold]{fmt(ratio['ratio'], 2)}[/] (rounds: {pairs or 'none'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="no-op tasks per cell")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument(
        "--store",
        default=None,
        help="redis://HOST:PORT/DB, or a directory for SQLite files "
        "(default: a fresh SQLite file in a temporary directory per cell)",
    )
    parser.add_argument(
        "--flush", action="store_true", help="FLUSHDB the --store Redis database before each cell"
    )
    parser.add_argument(
        "--signing",
        choices=("on", "off", "both"),
        default="on",
        help="team/queue cells signed (the default of tenure run), --insecure, or both",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per cell, seconds")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep cell directories (logs, store) here"
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not set(modes) <= set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    stores = Stores(args.store, args.flush)
    host = machine()
    console.print(
        f"[bold]throughput[/]: {args.tasks} no-op tasks, modes {', '.join(modes)}, "
        f"workers {', '.join(map(str, counts))}, {args.rounds} round(s), {stores.kind} store"
    )
    console.print(host.line())
    root = bench_root(args.keep)
    signings = {"on": [True], "off": [False], "both": [True, False]}[args.signing]
    cells = [
        (m, n, signed)
        for m in modes
        for n in counts
        for signed in (signings if m != "local" else [False])
    ]
    samples: list[Sample] = []
    started = time.monotonic()
    for rnd in range(1, args.rounds + 1):
        for cell in cells if rnd % 2 else list(reversed(cells)):
            s = one_cell(cell, rnd, args, stores, root)
            samples.append(s)
            status = (
                f"{s.throughput:7.1f} tasks/s in {s.elapsed:5.2f} s (start-up {fmt(s.startup)} s)"
                if s.ok and s.throughput and s.elapsed
                else f"[red]failed[/]: {s.error}"
            )
            keys = "signed  " if s.signed else "insecure" if s.mode != "local" else "-       "
            console.print(f"round {rnd} {s.mode:5s} x{s.workers} {keys}: {status}")
    if args.keep is None and all(s.ok for s in samples):
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    elif not all(s.ok for s in samples):
        console.print(f"logs and stores of the failed runs are kept in {root}")
    rows = summarize(samples)
    ratios = signing_ratios(samples) if args.signing == "both" else []
    print_summary(rows, ratios, args.tasks, args.rounds, stores.kind)
    report_end(
        console,
        started,
        args,
        benchmark="throughput",
        host=host,
        store_kind=stores.kind,
        results={
            "summary": rows,
            "signing_ratios": ratios,
            "samples": [asdict(s) for s in samples],
        },
    )
    if not all(s.ok for s in samples):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
