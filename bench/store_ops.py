"""Store operations per second, from one process or several at once.

    .venv/bin/python bench/store_ops.py --store sqlite:///tmp/x.db --processes 1
    .venv/bin/python bench/store_ops.py --store sqlite:///tmp/x.db --processes 4 --json

Each measured *iteration* is a small unit of real coordination work, made of
one or more store calls:

- ``claim+renew``: claim the team's lease, renew it, release it (3 calls);
- ``fenced transition``: one compare-and-set transition at the current epoch
  and version (1 call);
- ``effect begin+finish``: claim a fresh idempotency key and record its
  result (2 calls);
- ``send+receive+ack``: one message through a queue (3 calls).

Every process is a real OS process (``spawn``) with its own store connection
and its own team, so the processes contend only for the store itself (for
SQLite: its single writer lock). All processes start each operation together
at a barrier and run it for ``--seconds``; the figures are aggregates over the
processes. This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tenure.store import Store, new_lease_token, open_store

WARMUP_ITERATIONS = 20
BARRIER_TIMEOUT = 120.0


# --- the operations ---------------------------------------------------------------------


class Operation:
    """One measured unit of work; ``setup`` runs once per process, unmeasured."""

    name = ""
    calls = 1

    def __init__(self, store: Store, team: str) -> None:
        self.store = store
        self.team = team
        self.n = 0

    def setup(self) -> None:
        """Prepare the state one iteration needs."""

    def run(self) -> None:
        raise NotImplementedError


class ClaimRenew(Operation):
    name = "claim+renew"
    calls = 3

    def run(self) -> None:
        token = new_lease_token()
        lease = self.store.claim_lease(self.team, "bench", 30.0, token=token)
        self.store.renew_lease(self.team, "bench", lease.epoch, 30.0, token=token)
        self.store.release_lease(self.team, "bench", lease.epoch, token=token)


class FencedTransition(Operation):
    name = "fenced transition"
    calls = 1

    def setup(self) -> None:
        self.epoch = self.store.claim_lease(
            self.team, "bench", 3600.0, token=new_lease_token()
        ).epoch
        self.version = self.store.create_task(
            self.team, "task", epoch=self.epoch, spec={"goal": "bench"}, state="running"
        ).version

    def run(self) -> None:
        self.n += 1
        record = self.store.transition(
            self.team,
            "task",
            epoch=self.epoch,
            expect=["running"],
            to="running",
            version=self.version,
            data={"n": self.n},
        )
        self.version = record.version


class EffectBeginFinish(Operation):
    name = "effect begin+finish"
    calls = 2

    def setup(self) -> None:
        self.epoch = self.store.claim_lease(
            self.team, "bench", 3600.0, token=new_lease_token()
        ).epoch

    def run(self) -> None:
        self.n += 1
        key = f"task-{self.n}:attempt-1"
        ticket = self.store.effect_begin(
            self.team, key, epoch=self.epoch, holder="bench", claim_seconds=60.0
        )
        assert ticket.status == "run"
        self.store.effect_finish(self.team, key, holder="bench", result={"n": self.n})


class SendReceiveAck(Operation):
    name = "send+receive+ack"
    calls = 3

    def run(self) -> None:
        self.n += 1
        self.store.send(self.team, "work", {"type": "task.assign", "n": self.n})
        [delivery] = self.store.receive(
            self.team, "work", consumer="bench", visibility_timeout=60.0
        )
        self.store.ack(self.team, "work", delivery.message_id)


OPERATIONS: dict[str, type[Operation]] = {
    op.name: op for op in (ClaimRenew, FencedTransition, EffectBeginFinish, SendReceiveAck)
}


# --- one process ------------------------------------------------------------------------


def worker(
    url: str, run_id: str, index: int, names: list[str], seconds: float, barrier: Any, out: Any
) -> None:
    """Run every operation in turn, each started together with the other processes."""
    try:
        store = open_store(url)
        try:
            for name in names:
                team = f"bench-{run_id}-{name.replace(' ', '-').replace('+', '-')}-{index}"
                op = OPERATIONS[name](store, team)
                op.setup()
                for _ in range(WARMUP_ITERATIONS):
                    op.run()
                barrier.wait(BARRIER_TIMEOUT)
                out.put(("ok", name, index, measure(op.run, seconds)))
        finally:
            store.close()
    except BaseException as exc:
        out.put(("error", "", index, f"{type(exc).__name__}: {exc}"))
        raise


def measure(step: Callable[[], None], seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    clock = time.perf_counter
    started = clock()
    end = started + seconds
    now = started
    while now < end:
        step()
        after = clock()
        latencies.append(after - now)
        now = after
    return {"iterations": len(latencies), "elapsed": now - started, "latencies": latencies}


# --- the run ----------------------------------------------------------------------------


@dataclass
class Row:
    operation: str
    calls_per_iteration: int
    processes: int
    iterations: int
    iterations_per_second: float
    calls_per_second: float
    p50_ms: float
    p99_ms: float


def run(url: str, processes: int, seconds: float, names: list[str]) -> list[Row]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    out = ctx.Queue()
    run_id = uuid.uuid4().hex[:8]
    procs = [
        ctx.Process(target=worker, args=(url, run_id, i, names, seconds, barrier, out))
        for i in range(processes)
    ]
    for proc in procs:
        proc.start()
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        for _ in range(processes * len(names)):
            status, name, index, value = out.get(timeout=BARRIER_TIMEOUT + seconds * 4)
            if status != "ok":
                raise SystemExit(f"benchmark process {index} failed: {value}")
            samples[name].append(value)
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    rows = []
    for name in names:
        got = samples[name]
        iterations = sum(s["iterations"] for s in got)
        per_second = sum(s["iterations"] / s["elapsed"] for s in got)
        latencies = sorted(x for s in got for x in s["latencies"])
        calls = OPERATIONS[name].calls
        rows.append(
            Row(
                operation=name,
                calls_per_iteration=calls,
                processes=processes,
                iterations=iterations,
                iterations_per_second=per_second,
                calls_per_second=per_second * calls,
                p50_ms=statistics.median(latencies) * 1000,
                p99_ms=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
            )
        )
    return rows


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store",
        default=None,
        help="store URL (default: a fresh SQLite file in a temporary directory)",
    )
    parser.add_argument("--processes", type=int, default=1, help="OS processes (default 1)")
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="measured seconds per operation (default 3)"
    )
    parser.add_argument(
        "--op",
        action="append",
        choices=sorted(OPERATIONS),
        help="operation to run (repeatable; default all)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.seconds <= 0:
        parser.error("--processes must be >= 1 and --seconds > 0")
    names = args.op or list(OPERATIONS)

    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'bench.db'}"
        rows = run(url, args.processes, args.seconds, names)

    info = machine()
    if args.json:
        report = {
            "store": url.split("?", 1)[0],
            "processes": args.processes,
            "seconds": args.seconds,
            "machine": info,
            "results": [asdict(row) for row in rows],
        }
        print(json.dumps(report, indent=2))
        return 0

    table = Table(
        title=f"Tenure store operations: {args.processes} process(es), {args.seconds:g}s each",
        caption=(
            f"{url.split('?', 1)[0]} | {info['nproc']} CPUs, {info['cpu']} | "
            f"Python {info['python']}, SQLite {info['sqlite']}"
        ),
    )
    table.add_column("operation", no_wrap=True)
    table.add_column("calls/iter", justify="right")
    table.add_column("iterations/s", justify="right")
    table.add_column("store calls/s", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p99 ms", justify="right")
    for row in rows:
        table.add_row(
            row.operation,
            str(row.calls_per_iteration),
            f"{row.iterations_per_second:,.0f}",
            f"{row.calls_per_second:,.0f}",
            f"{row.p50_ms:.2f}",
            f"{row.p99_ms:.2f}",
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
