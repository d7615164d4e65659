"""Slow I/O: N tasks that each wait S seconds, on W worker processes of C slots each:
Tenure (queue and team mode, ``--concurrency C`` when the build has it) against
Celery (``--pool threads -c C``) and Dramatiq (``--threads C``), on one Redis.

    .venv/bin/python bench/slow_io.py                                  # N=1000 S=1 W=4 C=64
    .venv/bin/python bench/slow_io.py --quick                          # N=40 S=0.2 W=2 C=4
    .venv/bin/python bench/slow_io.py --tasks 200 --seconds 0.5 --workers 2 --slots 16 --rounds 3

Reported per system: wall time (first enqueue to last completion seen), tasks/s,
the ideal wall N*S/(W*C), wall / ideal, and the workers' memory: the peak of the
RSS summed over every worker process (and its children), sampled every 0.2 s,
and the sum of each process's own peak (VmHWM). The Tenure team-mode leader runs
in the bench process and is not counted. Medians and ranges over rounds; the
systems rotate every round. Run plumbing (empty DB among 10-13, process groups,
warm-up) is that of ``bench/peers/run.py``. JSON goes to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from common import BenchError, install_cleanup, kill_all  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from run import machine, one_run, source_state, versions  # noqa: E402
from systems import SYSTEMS, Options  # noqa: E402

from _slots import cli_supports_concurrency, slots_note  # noqa: E402

CHOICES = ("celery", "dramatiq", "tenure-queue", "tenure-team")
RESULTS = HERE / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tasks", "-n", type=int, default=1000, help="N: tasks per run")
    p.add_argument("--seconds", "-s", type=float, default=1.0, help="S: each task's wait")
    p.add_argument("--workers", "-w", type=int, default=4, help="W: worker processes")
    p.add_argument("--slots", "-c", type=int, default=64, help="C: slots per worker process")
    p.add_argument("--rounds", type=int, default=1, help="rounds (each system once per round)")
    p.add_argument("--systems", nargs="+", default=list(CHOICES), choices=CHOICES)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per run")
    p.add_argument("--insecure", action="store_true", help="Tenure unsigned (default: signed)")
    p.add_argument("--quick", action="store_true", help="smoke sizes: N=40 S=0.2 W=2 C=4")
    p.add_argument("--json", type=Path, help=f"where the JSON goes (default: {RESULTS}/...)")
    p.add_argument("--logs", type=Path, help="keep worker logs in this directory")
    args = p.parse_args(argv)
    if args.quick:
        args.tasks, args.seconds, args.workers, args.slots = 40, 0.2, 2, 4
    if min(args.tasks, args.workers, args.slots, args.rounds) < 1 or args.seconds <= 0:
        p.error("--tasks, --workers, --slots, --rounds must be >= 1 and --seconds > 0")
    if args.json is None:
        args.json = RESULTS / f"slow-io-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    return args


def spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: list[dict[str, Any]], systems: list[str], ideal: float) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name in systems:
        ok = [r for r in runs if r["system"] == name and "seconds" in r]
        rows[name] = {
            "wall_s": spread([r["seconds"] for r in ok]),
            "tasks_per_s": spread([r["rate"] for r in ok]),
            "peak_rss_mb": spread([r["peak_rss_mb"] for r in ok]),
            "sum_hwm_mb": spread([r["sum_hwm_mb"] for r in ok]),
            "slots": ok[0]["slots"] if ok else None,
            "errors": sum(1 for r in runs if r["system"] == name and "error" in r),
        }
        wall = rows[name]["wall_s"]["median"]
        rows[name]["wall_over_ideal"] = wall / ideal if wall else None
    ratios: dict[str, float | None] = {}
    for t in ("tenure-queue", "tenure-team"):
        for peer in ("celery", "dramatiq"):
            a = rows.get(t, {}).get("tasks_per_s", {}).get("median")
            b = rows.get(peer, {}).get("tasks_per_s", {}).get("median")
            ratios[f"{t} / {peer} (tasks/s)"] = a / b if a and b else None
    return {"summary": rows, "ratios": ratios}


def render(console: Console, doc: dict[str, Any]) -> None:
    o = doc["options"]
    table = Table(
        title=f"{o['tasks']} tasks x {o['seconds']:g} s, {o['workers']} workers x "
        f"{o['slots']} slots, median of {o['rounds']} round(s); ideal {doc['ideal_wall_s']:.2f} s"
    )
    for col in (
        "system",
        "slots",
        "wall s",
        "range",
        "tasks/s",
        "x ideal",
        "peak RSS MB",
        "HWM MB",
    ):
        table.add_column(col, justify="left" if col == "system" else "right")
    for name, row in doc["summary"].items():
        wall, rate = row["wall_s"], row["tasks_per_s"]
        table.add_row(
            name,
            str(row["slots"]),
            _f(wall["median"]),
            f"{_f(wall['min'])}-{_f(wall['max'])}"
            + (f" ({row['errors']} err)" if row["errors"] else ""),
            _f(rate["median"], 1),
            _f(row["wall_over_ideal"]),
            _f(row["peak_rss_mb"]["median"], 0),
            _f(row["sum_hwm_mb"]["median"], 0),
        )
    console.print(table)
    for key, value in doc["ratios"].items():
        console.print(f"{key}: {_f(value)}")
    console.print(doc["tenure_slots"])


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_cleanup()
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    run_dir = args.logs or Path(tempfile.mkdtemp(prefix="tenure-slow-io-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    got = args.slots if cli_supports_concurrency() else 1
    ideal = args.tasks * args.seconds / (args.workers * args.slots)
    doc: dict[str, Any] = {
        "benchmark": "slow_io",
        "command": " ".join([".venv/bin/python", "bench/slow_io.py", *(argv or sys.argv[1:])]),
        "options": {k: v for k, v in vars(args).items() if k not in ("json", "logs")},
        "ideal_wall_s": ideal,
        "slots_supported": got == args.slots,
        "tenure_slots": slots_note(args.slots, got),
        "machine": machine(),
        "versions": versions(),
        "tenure_source": source_state(),
        "runs": [],
    }
    console.print(doc["tenure_slots"])
    try:
        for rnd in range(1, args.rounds + 1):
            shift = (rnd - 1) % len(args.systems)
            for name in args.systems[shift:] + args.systems[:shift]:
                opts = Options(
                    workers=args.workers,
                    run_dir=run_dir,
                    timeout=args.timeout,
                    warm_tasks=args.workers,
                    slots=args.slots,
                    sleep=args.seconds,
                    signed=not args.insecure,
                )
                record: dict[str, Any] = {"system": name, "round": rnd}
                try:
                    record.update(one_run(SYSTEMS[name], opts, args.tasks, memory=True))
                    console.print(
                        f"round {rnd} {name:13} {record['seconds']:7.2f} s "
                        f"{record['rate']:8.1f} tasks/s, peak RSS {record['peak_rss_mb']:.0f} MB"
                    )
                except BenchError as exc:
                    record["error"] = str(exc)
                    console.print(f"[red]round {rnd} {name}: {exc}[/]")
                except Exception as exc:
                    record["error"] = f"{type(exc).__name__}: {exc}"
                    console.print(f"[red]round {rnd} {name}: {record['error']}[/]")
                    console.print(traceback.format_exc(), markup=False, style="dim")
                doc["runs"].append(record)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: reporting what finished[/]")
    finally:
        kill_all()
    doc.update(summarize(doc["runs"], args.systems, ideal))
    render(console, doc)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    console.print(f"JSON written to {args.json}")
    return 0 if all("error" not in r for r in doc["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
