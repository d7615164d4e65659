"""Redis commands per task, for every system, seen by the server (``MONITOR``).

    .venv/bin/python bench/peers/commands.py --workers 2 --tasks 300 [--json FILE]

Same setup as ``run.py`` (warm-up excluded); while the timed batch runs, a
``redis-cli monitor`` process records every command the server executes. Counted
for the run's DB and time window: commands sent by clients (each is a request;
pipelined ones share a round trip, so this is an upper bound on round trips) and
commands executed inside Lua scripts (server work a client never sees). The
completion tracker's own connection is left out. MONITOR slows the server, so
these runs are not timed. Not to be run beside ``run.py``: it measures the server.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    HOST,
    PORT,
    TRACKER_NAME,
    claim_db,
    client,
    install_cleanup,
    kill_all,
    release_db,
    still_ours,
)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from systems import SYSTEMS, Options  # noqa: E402

LINE = re.compile(r'^(\d+\.\d+) \[(\d+) ([^\]]*)\] "([^"]*)"(?: "([^"]*)")?')


def script_names() -> dict[str, str]:
    try:
        from tenure.store.redis.scripts import SCRIPTS, script_body
    except ImportError:
        return {}
    return {
        hashlib.sha1(script_body(body).encode()).hexdigest(): name for name, body in SCRIPTS.items()
    }


def count(path: Path, db: int, start: float, end: float, skip: set[str]) -> dict[str, Counter[str]]:
    names = script_names()
    found: dict[str, Counter[str]] = {"client": Counter(), "lua": Counter()}
    with path.open(errors="replace") as lines:
        for line in lines:
            m = LINE.match(line)
            if not m or int(m.group(2)) != db or not start <= float(m.group(1)) <= end:
                continue
            who, command = m.group(3), m.group(4).upper()
            if who in skip:
                continue
            if command == "EVALSHA" and m.group(5):
                command = f"EVALSHA:{names.get(m.group(5), m.group(5)[:8])}"
            found["lua" if who == "lua" else "client"][command] += 1
    return found


def tracker_addresses(db: int) -> set[str]:
    with client(db) as r:
        return {c["addr"] for c in r.client_list() if c.get("name") == TRACKER_NAME}


def server_time(db: int) -> float:
    with client(db) as r:
        seconds, micros = r.time()
    return seconds + micros / 1e6


def measure(name: str, workers: int, tasks: int, run_dir: Path) -> dict[str, Any]:
    cls = SYSTEMS[name]
    db = claim_db()
    system = cls(Options(workers=workers, run_dir=run_dir), db)
    log = run_dir / f"monitor-{name}.txt"
    monitor: subprocess.Popen[bytes] | None = None
    try:
        system.start()
        system.warm_up()
        system.prepare(tasks)
        with log.open("wb") as out:
            monitor = subprocess.Popen(
                ["redis-cli", "-h", HOST, "-p", str(PORT), "monitor"],
                stdout=out,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        time.sleep(0.5)
        start = server_time(db)
        system.submit()
        tracker = system.tracker()
        tracker.wait(timeout=900.0, what=name, alive=system.alive)
        end = server_time(db)
        skip = tracker_addresses(db)
        time.sleep(0.3)
        system.finish()
        if not still_ours(db):
            raise RuntimeError(f"DB {db} was flushed by someone else during the run")
    finally:
        if monitor is not None:
            monitor.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                monitor.wait(timeout=5)
            if monitor.poll() is None:
                monitor.kill()
        with contextlib.suppress(Exception):
            system.stop()
        release_db(db)
    found = count(log, db, start, end, skip)
    log.unlink(missing_ok=True)
    return {
        "client": dict(found["client"]),
        "lua": dict(found["lua"]),
        "client_per_task": sum(found["client"].values()) / tasks,
        "lua_per_task": sum(found["lua"].values()) / tasks,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tasks", type=int, default=300)
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    install_cleanup()
    console = Console(width=None if sys.stdout.isatty() else 120)
    run_dir = Path(tempfile.mkdtemp(prefix="tenure-commands-"))
    results: dict[str, Any] = {}
    try:
        for name in args.systems:
            results[name] = measure(name, args.workers, args.tasks, run_dir)
            r = results[name]
            console.print(
                f"{name:13} {r['client_per_task']:6.2f} client commands/task, "
                f"{r['lua_per_task']:6.2f} inside Lua/task"
            )
    finally:
        kill_all()
    table = Table(
        title=f"Redis commands per task ({args.tasks} no-op tasks, {args.workers} workers)"
    )
    for col in ("system", "from clients", "inside Lua", "top client commands per task"):
        table.add_column(
            col, justify="left" if col in ("system", "top client commands per task") else "right"
        )
    for name, r in results.items():
        top = sorted(r["client"].items(), key=lambda kv: -kv[1])[:6]
        table.add_row(
            name,
            f"{r['client_per_task']:.2f}",
            f"{r['lua_per_task']:.2f}",
            ", ".join(f"{k} {v / args.tasks:.2f}" for k, v in top),
        )
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
