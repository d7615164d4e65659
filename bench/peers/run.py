"""Side-by-side queue throughput on one Redis: Celery, RQ, Dramatiq (one thread per
process, and its default of eight), a raw Streams loop (the ceiling), Tenure queue
mode and Tenure team mode.

    .venv/bin/python bench/peers/run.py --workers 2 4 --rounds 3 [--tasks 1000] [--json out.json]
    .venv/bin/python bench/peers/run.py --quick        # a smoke run: 2 workers, 100 tasks, 1 round

For each round, each worker count and each system in turn (the order rotates every
round): claim an empty DB among 10-13 (marked with a token), start N worker processes,
wait until each has run a task, run a warm-up batch, then time ``--tasks`` no-op
tasks from the first enqueue until the last completion is seen in Redis. Workers are
stopped and the DB flushed (only while our mark is on it) after every run; a run
whose DB someone else flushed meanwhile is discarded and repeated. Medians over
rounds are reported, with ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    REPO,
    BenchError,
    Interference,
    claim_db,
    install_cleanup,
    kill_all,
    release_db,
    server_version,
    still_ours,
)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from systems import PEERS, RAW, SYSTEMS, TENURE, Options, System  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/
from _memory import PeakRSS  # noqa: E402

DEFAULT_ORDER = [
    "celery", "rq", "rq-simple", "dramatiq", "dramatiq-default", RAW, "tenure-queue", "tenure-team",
]  # fmt: skip
RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4], help="worker process counts")
    p.add_argument("--rounds", type=int, default=3, help="rounds (each system once per round)")
    p.add_argument("--tasks", type=int, default=1000, help="no-op tasks per timed run")
    p.add_argument(
        "--systems", nargs="+", default=DEFAULT_ORDER, choices=list(SYSTEMS), help="which systems"
    )
    p.add_argument("--warm", type=int, default=50, help="warm-up tasks before each timed run")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per timed run")
    p.add_argument(
        "--dramatiq-worker-timeout",
        type=int,
        default=100,
        help="dramatiq_worker_timeout in ms (idle poll cap; Dramatiq's default is 1000)",
    )
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="write the results as JSON to FILE (or stdout with no FILE; the table goes to stderr)",
    )
    p.add_argument("--logs", type=Path, help="keep worker logs in this directory")
    p.add_argument(
        "--insecure", action="store_true", help="Tenure unsigned (default: signed, as tenure run)"
    )
    p.add_argument(
        "--quick", action="store_true", help="smoke sizes: 2 workers, 100 tasks, 10 warm, 1 round"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.workers, args.tasks, args.warm, args.rounds = [2], 100, 10, 1
    if args.json is None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        args.json = str(RESULTS / f"noop-{stamp}.json")
    if args.rounds < 1 or args.tasks < 1 or any(w < 1 or w > 32 for w in args.workers):
        p.error("--rounds and --tasks must be >= 1, --workers between 1 and 32")
    return args


def one_run(
    cls: type[System], opts: Options, tasks: int, *, memory: bool = False
) -> dict[str, Any]:
    """Claim an empty DB, start, warm up, time, stop, flush; retried when someone else
    flushed the DB during the run (other sessions share this Redis server). With
    ``memory``, the workers' summed RSS is sampled while the clock runs."""
    for attempt in range(1, 4):
        db = claim_db()
        system = cls(opts, db)
        try:
            system.start()
            system.warm_up()
            system.prepare(tasks)
            sampler = PeakRSS(lambda s=system: [p.pid for p in s.procs]) if memory else None
            with sampler or contextlib.nullcontext():
                t0 = time.perf_counter()
                system.submit()
                enqueued = time.perf_counter()
                t1 = system.tracker().wait(timeout=opts.timeout, what=cls.name, alive=system.alive)
            system.finish()
            if not still_ours(db):
                raise Interference(f"DB {db} was flushed by someone else during the run")
            seconds = t1 - t0
            record = {
                "seconds": seconds,
                "rate": tasks / seconds,
                "enqueue_seconds": enqueued - t0,
                "not_done": len(getattr(system, "settled_not_done", [])),
                "db": db,
                "attempt": attempt,
                "slots": getattr(system, "slots", opts.slots),
            }
            if sampler is not None:
                record["peak_rss_mb"] = round(sampler.peak_mb, 1)
                record["sum_hwm_mb"] = round(sampler.hwm_mb, 1)
            return record
        except BenchError as exc:
            if attempt == 3 or not (isinstance(exc, Interference) or not still_ours(db)):
                raise
            print(
                f"  {cls.name}: DB {db} disturbed by another user ({exc}); again", file=sys.stderr
            )
        finally:
            with contextlib.suppress(Exception):
                system.stop()
            release_db(db)
    raise AssertionError("unreachable")


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": model or platform.processor(),
        "platform": platform.platform(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def source_state() -> dict[str, Any]:
    """Which Tenure was measured: the commit, and how many files under src/ differed from it."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.strip()

    dirty = [line for line in git("status", "--porcelain", "--", "src").splitlines() if line]
    diff = git("diff", "HEAD", "--", "src")
    return {
        "commit": git("rev-parse", "HEAD"),
        "src_files_changed_from_commit": len(dirty),
        "src_diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else "",
    }


def versions() -> dict[str, str]:
    found = {}
    for dist in ("tenure", "celery", "kombu", "rq", "dramatiq", "redis", "hiredis"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "-"
    found["redis-server"] = server_version()
    return found


def summarize(runs: list[dict[str, Any]], systems: list[str], workers: list[int]) -> dict[str, Any]:
    medians: dict[str, dict[str, float | None]] = {}
    for name in systems:
        medians[name] = {}
        for w in workers:
            rates = [
                r["rate"] for r in runs if r["system"] == name and r["workers"] == w and "rate" in r
            ]
            medians[name][str(w)] = statistics.median(rates) if rates else None

    def ratio(a: str, b: str, w: int) -> float | None:
        x, y = medians.get(a, {}).get(str(w)), medians.get(b, {}).get(str(w))
        return x / y if x and y else None

    ratios: dict[str, dict[str, float | None]] = {}
    for w in workers:
        row: dict[str, float | None] = {}
        for t in TENURE:
            for peer in PEERS:
                row[f"{t} / {peer}"] = ratio(t, peer, w)
        for name in systems:
            if name != RAW:
                row[f"{name} / {RAW}"] = ratio(name, RAW, w)
        ratios[str(w)] = row

    def met(key: str, w: int, limit: float) -> bool | None:
        value = ratios[str(w)].get(key)
        return None if value is None else value > limit

    targets: dict[str, dict[str, bool | None]] = {}
    for w in workers:
        targets[str(w)] = {
            **{f"tenure-queue ahead of {p}": met(f"tenure-queue / {p}", w, 1.0) for p in PEERS},
            **{
                f"tenure-team ahead of {p}": met(f"tenure-team / {p}", w, 1.0)
                for p in ("celery", "rq", "rq-simple")
            },
            "tenure-queue within 3x of raw": met(f"tenure-queue / {RAW}", w, 1 / 3),
            "tenure-team within 3x of raw": met(f"tenure-team / {RAW}", w, 1 / 3),
        }
    return {"medians": medians, "ratios": ratios, "targets": targets}


def render(console: Console, doc: dict[str, Any]) -> None:
    workers = doc["options"]["workers"]
    runs = doc["runs"]
    table = Table(title=f"No-op tasks/s, median of {doc['options']['rounds']} rounds "
                  f"({doc['options']['tasks']} tasks per run)")  # fmt: skip
    table.add_column("system")
    for w in workers:
        table.add_column(f"{w} workers", justify="right")
        table.add_column("range", justify="right", style="dim")
        table.add_column("x raw", justify="right")
    for name, per in doc["medians"].items():
        cells = [name]
        for w in workers:
            rates = [
                r["rate"] for r in runs if r["system"] == name and r["workers"] == w and "rate" in r
            ]
            errors = sum(
                1 for r in runs if r["system"] == name and r["workers"] == w and "error" in r
            )
            m = per[str(w)]
            cells.append(f"{m:,.0f}" if m else "error")
            span = f"{min(rates):,.0f}-{max(rates):,.0f}" if rates else ""
            cells.append(span + (f" ({errors} err)" if errors else ""))
            raw = doc["medians"].get(RAW, {}).get(str(w))
            cells.append(f"{m / raw:.2f}" if m and raw else "")
        table.add_row(*cells)
    console.print(table)

    ratios = Table(title="Ratios of medians (>1: the left side is faster)")
    ratios.add_column("ratio")
    for w in workers:
        ratios.add_column(f"{w} workers", justify="right")
    keys = list(doc["ratios"][str(workers[0])])
    for key in keys:
        ratios.add_row(key, *[_fmt(doc["ratios"][str(w)].get(key)) for w in workers])
    console.print(ratios)

    targets = Table(title="Targets of the issue")
    targets.add_column("target")
    for w in workers:
        targets.add_column(f"{w} workers", justify="center")
    for key in doc["targets"][str(workers[0])]:
        targets.add_row(key, *[_mark(doc["targets"][str(w)][key]) for w in workers])
    console.print(targets)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("[green]met[/]" if value else "[red]not met[/]")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_cleanup()
    to_stderr = args.json == "-"
    tty = (sys.stderr if to_stderr else sys.stdout).isatty()
    console = Console(stderr=to_stderr, width=None if tty else 120)
    run_dir = args.logs or Path(tempfile.mkdtemp(prefix="tenure-peers-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "bench/peers/run.py", *(argv or sys.argv[1:])]),
        "options": {
            "workers": args.workers,
            "rounds": args.rounds,
            "tasks": args.tasks,
            "warm": args.warm,
            "systems": args.systems,
            "dramatiq_worker_timeout_ms": args.dramatiq_worker_timeout,
            "tenure_signed": not args.insecure,
        },
        "machine": machine(),
        "versions": versions(),
        "tenure_source": source_state(),
        "systems": {},
        "runs": [],
    }
    console.print(f"[dim]logs and member state: {run_dir}[/]")
    started = time.monotonic()
    try:
        for rnd in range(1, args.rounds + 1):
            shift = (rnd - 1) % len(args.systems)
            order = args.systems[shift:] + args.systems[:shift]
            for w in args.workers:
                for name in order:
                    cls = SYSTEMS[name]
                    opts = Options(
                        workers=w,
                        run_dir=run_dir,
                        timeout=args.timeout,
                        warm_tasks=args.warm,
                        dramatiq_worker_timeout_ms=args.dramatiq_worker_timeout,
                        signed=not args.insecure,
                    )
                    probe = cls(opts, db=-1)
                    doc["systems"][name] = {"workers": probe.how, "completion": probe.completion}
                    record: dict[str, Any] = {"system": name, "workers": w, "round": rnd}
                    try:
                        record.update(one_run(cls, opts, args.tasks))
                        console.print(
                            f"round {rnd} w={w} {name:13} {record['rate']:9,.0f} tasks/s "
                            f"({record['seconds']:.2f}s, enqueue {record['enqueue_seconds']:.2f}s"
                            + (f", {record['not_done']} not done" if record["not_done"] else "")
                            + ")"
                        )
                    except BenchError as exc:
                        record["error"] = str(exc)
                        console.print(f"[red]round {rnd} w={w} {name}: {exc}[/]")
                    except Exception as exc:
                        record["error"] = f"{type(exc).__name__}: {exc}"
                        console.print(f"[red]round {rnd} w={w} {name}: {record['error']}[/]")
                        console.print(traceback.format_exc(), markup=False, style="dim")
                    doc["runs"].append(record)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: reporting what finished[/]")
    finally:
        kill_all()
    doc["elapsed_seconds"] = round(time.monotonic() - started, 1)
    doc["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["tenure_source_at_end"] = source_state()
    doc.update(summarize(doc["runs"], args.systems, args.workers))
    render(console, doc)
    if args.json == "-":
        print(json.dumps(doc, indent=2))
    elif args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        console.print(f"JSON written to {args.json}")
    return 0 if all("error" not in r for r in doc["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
