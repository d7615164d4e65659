"""Where Tenure's time goes on Redis: round trips per task and CPU profiles.

    .venv/bin/python bench/peers/profile_tenure.py --mode queue --workers 2 --tasks 1000
    .venv/bin/python bench/peers/profile_tenure.py --mode team --workers 2 --tasks 300 --py-spy

Runs the same setup as ``run.py`` (worker processes on DB 13, warm-up excluded), but
every worker runs under ``probe.py``, which counts and times each Redis round trip
per command (Tenure's Lua scripts by name); the producer or in-process leader is
probed the same way. ``--py-spy`` samples one worker and this process (the leader
in team mode) during the timed window; ``--cprofile`` profiles the workers' main
threads. Prints tables, and the JSON with ``--json FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe  # noqa: E402
from common import (  # noqa: E402
    HERE,
    PYTHON,
    BenchError,
    claim_db,
    install_cleanup,
    kill_all,
    release_db,
    still_ours,
)
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402
from systems import Options, TenureQueueSystem, TenureTeamSystem  # noqa: E402

PY_SPY = str(Path(PYTHON).parent / "py-spy")


def probed(base: type) -> type:
    class Probed(base):  # type: ignore[misc, valid-type]
        cprofile = False

        def launcher(self, index: int) -> list[str]:
            out = self.opts.run_dir / f"probe-{self.name}-{index}.json"
            argv = [PYTHON, str(HERE / "probe.py"), str(out)]
            if self.cprofile:
                argv += ["--cprofile", str(self.opts.run_dir / f"probe-{self.name}-{index}.prof")]
            return [*argv, "--", "tenure"]

    return Probed


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PY_SPY, "record", "--pid", str(pid), "--rate", "250", "--format", "raw",
         "--output", str(out), "--nonblocking", "--threads"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def stop_py_spy(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def summarize_stacks(path: Path, only_thread: str | None = None, top: int = 14) -> dict[str, Any]:
    """Collapsed stacks -> inclusive and self shares by function, and coarse buckets."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    buckets: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"samples": 0}
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        if only_thread and only_thread not in frames[0]:
            continue
        count = int(count_text)
        total += count
        names = [_short(f) for f in frames[1:]] or ["?"]
        for name in set(names):
            inclusive[name] += count
        own[names[-1]] += count
        buckets[_bucket(frames)] += count
    if not total:
        return {"samples": 0}

    def share(c: Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in c.most_common(top)]

    return {
        "samples": total,
        "buckets": share(buckets),
        "inclusive": share(inclusive),
        "self": share(own),
    }


def _short(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)"
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return f"{name} [{file}]"


def _bucket(frames: list[str]) -> str:
    text = ";".join(frames)
    leaf = frames[-1]
    if "time.sleep" in text or "wait (threading.py" in text or "_wait_for_tstate_lock" in leaf:
        return "idle (sleep / wait)"
    if "redis/" in text and (
        "recv" in leaf or "read" in leaf.split(" (")[0] or "_readline" in leaf
    ):
        return "waiting for Redis replies"
    if "redis/" in text:
        return "redis-py (encode/decode/connection)"
    if "pydantic" in text or "model_validate" in text or "to_dict" in text:
        return "pydantic (validate/serialize)"
    if "json/" in text:
        return "json"
    return "other Python"


def profile_stats(paths: list[Path], top: int = 18) -> list[tuple[str, float, float]]:
    stats: pstats.Stats | None = None
    for path in paths:
        if path.exists():
            stats = pstats.Stats(str(path)) if stats is None else (stats.add(str(path)) or stats)
    if stats is None:
        return []
    total = stats.total_tt or 1.0  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_cc, _nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((f"{func} [{Path(file).name}:{line}]", 100 * tt / total, 100 * ct / total))
    rows.sort(key=lambda r: r[2], reverse=True)
    return rows[:top]


def merge(counts: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    merged: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "seconds": 0.0})
    for one in counts:
        for name, c in one.items():
            merged[name]["calls"] += c["calls"]
            merged[name]["seconds"] += c["seconds"]
    return dict(merged)


def rtt_table(title: str, counts: dict[str, dict[str, float]], tasks: int) -> Table:
    table = Table(title=title)
    for col in ("command", "round trips", "per task", "ms each", "ms per task"):
        table.add_column(col, justify="left" if col == "command" else "right")
    total_calls = total_secs = 0.0
    for name, c in sorted(counts.items(), key=lambda kv: -kv[1]["calls"]):
        calls, secs = c["calls"], c["seconds"]
        total_calls += calls
        total_secs += secs
        table.add_row(
            name, f"{calls:,.0f}", f"{calls / tasks:.2f}",
            f"{1000 * secs / calls:.3f}" if calls else "-", f"{1000 * secs / tasks:.2f}",
        )  # fmt: skip
    table.add_row(
        "[bold]total[/]", f"{total_calls:,.0f}", f"[bold]{total_calls / tasks:.2f}[/]", "",
        f"{1000 * total_secs / tasks:.2f}",
    )  # fmt: skip
    return table


def cache_now(store: Any, seconds: float) -> None:
    """Experiment: ``store.now()`` reads the server clock at most every ``seconds``."""
    real = store.now
    last = [float("-inf"), 0.0]

    def now() -> float:
        t = time.monotonic()
        if t - last[0] > seconds:
            last[0], last[1] = t, real()
        return float(last[1] + (t - last[0]))

    store.now = now


def profile_leader() -> cProfile.Profile:
    """cProfile every ``Leader.run`` started from now on (called after the warm-up)."""
    from tenure.roles.leader import candidate as leader_module

    profiler = cProfile.Profile()
    run = leader_module.Candidate.run

    def profiled(self: Any, stop: Any) -> Any:
        profiler.enable()
        try:
            return run(self, stop)
        finally:
            profiler.disable()

    leader_module.Candidate.run = profiled  # type: ignore[method-assign]
    return profiler


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", choices=["queue", "team"], default="queue")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--py-spy", action="store_true", help="sample worker 0 and this process")
    p.add_argument("--cprofile", action="store_true", help="cProfile the workers' main threads")
    p.add_argument(
        "--cprofile-leader", action="store_true", help="team mode: cProfile the leader thread"
    )
    p.add_argument(
        "--cache-now",
        type=float,
        metavar="MS",
        help="team mode experiment: the leader's store.now() answers from a clock read every "
        "MS ms (what one TIME per tick instead of one per queued task would give)",
    )
    p.add_argument("--json", type=Path, help="write the figures to this file")
    p.add_argument("--dir", type=Path, help="keep probe files here")
    args = p.parse_args()
    install_cleanup()
    probe.install()
    console = Console(width=None if sys.stdout.isatty() else 120)
    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="tenure-profile-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    base = TenureQueueSystem if args.mode == "queue" else TenureTeamSystem
    cls = probed(base)
    cls.cprofile = args.cprofile
    db = claim_db()
    leader_profile: cProfile.Profile | None = None
    system = cls(Options(workers=args.workers, run_dir=run_dir, timeout=args.timeout), db)
    spies: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    try:
        system.start()
        if args.cache_now and args.mode == "team":
            cache_now(system.store, args.cache_now / 1000)
        system.warm_up()
        if args.cprofile_leader and args.mode == "team":
            leader_profile = profile_leader()
        for proc in system.procs:
            proc.send_signal(signal.SIGUSR1)  # the workers zero their counts
        time.sleep(0.2)
        system.prepare(args.tasks)
        probe.reset()
        if args.py_spy:
            spies.append(("worker 0", start_py_spy(system.procs[0].pid, run_dir / "spy-w0.txt"),
                          run_dir / "spy-w0.txt"))  # fmt: skip
            who = "producer" if args.mode == "queue" else "leader"
            spies.append((f"{who} (this process)", start_py_spy(os.getpid(), run_dir / "spy-main.txt"),
                          run_dir / "spy-main.txt"))  # fmt: skip
            time.sleep(1.0)  # py-spy attaches
        t0 = time.perf_counter()
        system.submit()
        enqueued = time.perf_counter()
        t1 = system.tracker().wait(timeout=args.timeout, what=system.name, alive=system.alive)
        seconds = t1 - t0
        main_counts = probe.snapshot()
        if not still_ours(db):
            raise BenchError(f"DB {db} was flushed by someone else during the run; run again")
        for _, spy, _ in spies:
            stop_py_spy(spy)
        system.finish()
    finally:
        with contextlib.suppress(Exception):
            system.stop()
        release_db(db)
        kill_all()
    worker_counts = [
        json.loads(f.read_text()) for f in sorted(run_dir.glob(f"probe-{system.name}-*.json"))
    ]
    workers = merge(worker_counts)
    side = "producer (enqueue_plan)" if args.mode == "queue" else "leader (in-process)"
    console.print(
        f"[bold]{system.name}[/], {args.workers} workers, {args.tasks} tasks: "
        f"{args.tasks / seconds:,.1f} tasks/s ({seconds:.2f}s, enqueue {enqueued - t0:.2f}s)"
    )
    console.print(rtt_table(f"{side}: Redis round trips", main_counts, args.tasks))
    console.print(rtt_table(f"all {args.workers} workers: Redis round trips", workers, args.tasks))
    doc: dict[str, Any] = {
        "mode": args.mode,
        "workers": args.workers,
        "tasks": args.tasks,
        "seconds": seconds,
        "rate": args.tasks / seconds,
        "enqueue_seconds": enqueued - t0,
        "main_round_trips": main_counts,
        "worker_round_trips": workers,
    }
    for label, _, path in spies:
        summary = summarize_stacks(path)
        doc[f"py-spy {label}"] = summary
        if not summary.get("samples"):
            console.print(f"[yellow]py-spy {label}: no samples[/]")
            continue
        for key in ("buckets", "inclusive", "self"):
            table = Table(title=f"py-spy {label}: {key} (% of {summary['samples']} samples)")
            table.add_column("function")
            table.add_column("%", justify="right")
            for name, pct in summary[key]:
                table.add_row(escape(name), f"{pct:.1f}")
            console.print(table)
    if leader_profile is not None:
        leader_profile.dump_stats(str(run_dir / "leader.prof"))
        rows = profile_stats([run_dir / "leader.prof"])
        doc["cprofile_leader"] = rows
        table = Table(title="cProfile, the leader thread (% of its time)")
        for col in ("function", "self %", "cumulative %"):
            table.add_column(col, justify="left" if col == "function" else "right")
        for name, tt, ct in rows:
            table.add_row(escape(name), f"{tt:.1f}", f"{ct:.1f}")
        console.print(table)
    if args.cprofile:
        rows = profile_stats(sorted(run_dir.glob(f"probe-{system.name}-*.prof")))
        doc["cprofile_workers"] = rows
        table = Table(title="cProfile, workers' main threads (% of profiled time)")
        for col in ("function", "self %", "cumulative %"):
            table.add_column(col, justify="left" if col == "function" else "right")
        for name, tt, ct in rows:
            table.add_row(escape(name), f"{tt:.1f}", f"{ct:.1f}")
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(f"[dim]probe files: {run_dir}[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
