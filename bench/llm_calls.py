"""Many concurrent model calls through Tenure's LLM executor, against a local
OpenAI-compatible server (``bench/model_server.py``) that answers after a delay.

    .venv/bin/python bench/llm_calls.py                              # 1000 calls, 1 s each, both paths
    .venv/bin/python bench/llm_calls.py --quick                      # 20 calls of 0.2 s
    .venv/bin/python bench/llm_calls.py --via queue --workers 4 --slots 250

Two paths, each with N tasks whose one model call the server answers after D s:

- **executor**: N threads of the bench process, each running one attempt of
  ``LLMExecutor`` (``llm:openai:bench@URL``: the real OpenAI SDK, envelope,
  validation) at once. It measures the executor and the SDK under N calls in
  flight, whatever the workers around them allow.
- **queue**: W ``tenure worker --queue --exec llm:...`` processes with
  ``--concurrency C`` when the build has it (else one task at a time, said in
  the output), and the N tasks enqueued together (``enqueue_plan``, signed).

Reported: wall time (first call or enqueue to the last result), tasks/s, the
ideal wall (D x ceil(N / concurrency)), the most requests the server saw in flight
at once, and memory: for the executor path the bench process's RSS growth
(peak minus before) and peak; for the queue path the workers' summed RSS peak.
The server runs in its own process (asyncio: it is never the limit).
JSON goes to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from _common import RunDir, Stores, check_alive, machine, report_end, spawn_member, unique_team
from _memory import PeakRSS, hwm_mb, rss_mb
from _slots import concurrency_flags, slots_note
from tenure.console.processes import stop_all
from tenure.coord.credentials import Credentials, init_team
from tenure.executors import TaskContext
from tenure.executors.llm import LLMExecutor
from tenure.protocol import Plan, PlanTask, TaskEnvelope, idempotency_key
from tenure.roles.teams.queue import enqueue_plan
from tenure.store import open_store

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PATHS = ("executor", "queue")


class ModelServer:
    """``bench/model_server.py`` in a process of its own; ``url`` is its /v1 base."""

    def __init__(self, delay: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "model_server.py"), "--delay", str(delay)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.close()
            raise SystemExit("bench/model_server.py did not start")

    def stats(self) -> dict[str, int]:
        base = self.url.rsplit("/v1", 1)[0]
        with urllib.request.urlopen(f"{base}/stats", timeout=10) as reply:
            return dict(json.loads(reply.read()))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def envelope(n: int) -> TaskEnvelope:
    task_id = f"call{n:05d}"
    return TaskEnvelope.model_validate(
        {
            "task_id": task_id,
            "idempotency_key": idempotency_key(task_id, 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "bench",
            "deadline_seconds": 600,
            "goal": "Answer ok.",
            "acceptance_criteria": ["The answer is ok."],
        }
    )


def via_executor(server: ModelServer, n: int, workdir: Path) -> dict[str, Any]:
    executor = LLMExecutor.from_spec(f"openai:bench@{server.url}")
    envelopes = [envelope(i) for i in range(n)]
    statuses: list[str] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(n + 1)

    def one(env: TaskEnvelope) -> None:
        ctx = TaskContext(worker_id="bench", team="bench", workdir=workdir, envelope=env)
        start.wait()
        result = executor.execute(env, ctx)
        with lock:
            statuses.append(result.status)
            if result.status != "completed" and len(failures) < 3:
                failures.append(str(result.notes)[:300])

    before = rss_mb([_self()])
    threads = [threading.Thread(target=one, args=(e,), daemon=True) for e in envelopes]
    for t in threads:
        t.start()
    with PeakRSS(lambda: [_self()]) as mem:
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "completed": statuses.count("completed"),
        "failures": failures,
        "concurrency": n,
        "rss_before_mb": round(before, 1),
        "peak_rss_mb": round(mem.peak_mb, 1),
        "rss_growth_mb": round(mem.peak_mb - before, 1),
        "process_hwm_mb": round(hwm_mb([_self()]), 1),
    }


def _self() -> int:
    import os

    return os.getpid()


def via_queue(
    server: ModelServer, n: int, workers: int, slots: int, root: Path, store_prefix: str | None
) -> dict[str, Any]:
    run = RunDir(root, "queue")
    url = Stores(store_prefix).url_for(run.path, "queue")
    team = unique_team("llm")
    keys = run.path / "keys"
    init_team(keys, team, [f"w{i}" for i in range(workers)])
    lead = Credentials.load(keys, team, "leader", "lead")
    flags, got = concurrency_flags(slots)
    spec = f"llm:openai:bench@{server.url}"
    procs = {
        f"w{i}": spawn_member(
            [
                "worker",
                "--queue",
                "--team",
                team,
                "--exec",
                spec,
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
        for i in range(workers)
    }
    plan = Plan(team=team, tasks=[PlanTask(id=f"c{i:05d}", goal="Answer ok.") for i in range(n)])
    try:
        with open_store(url) as store:
            time.sleep(1.0)  # let the workers import the SDK before the clock starts
            check_alive(procs)
            with PeakRSS(lambda: [p.pid for p in procs.values()]) as mem:
                t0 = store.now()
                enqueue_plan(store, plan, credentials=lead)
                deadline = time.monotonic() + 120 + 5 * n
                while True:
                    tasks = store.tasks(team)
                    if all(t.state in ("done", "failed", "blocked", "cancelled") for t in tasks):
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{sum(t.state == 'done' for t in tasks)} of {n} done")
                    check_alive(procs)
                    time.sleep(0.05)
                wall = max(t.updated_at for t in tasks) - t0
    finally:
        stop_all(list(procs.values()))
    run.remove()
    return {
        "wall_s": wall,
        "completed": sum(t.state == "done" for t in tasks),
        "concurrency": workers * got,
        "slots": got,
        "peak_rss_mb": round(mem.peak_mb, 1),
        "sum_hwm_mb": round(mem.hwm_mb, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--calls", "-n", type=int, default=1000, help="N: tasks, one model call each")
    p.add_argument("--delay", type=float, default=1.0, help="D: seconds the server takes per call")
    p.add_argument("--via", nargs="+", default=list(PATHS), choices=PATHS)
    p.add_argument("--workers", type=int, default=4, help="queue path: worker processes")
    p.add_argument("--slots", type=int, default=250, help="queue path: slots per worker")
    p.add_argument("--store", help="queue path: store URL prefix (default: a fresh SQLite file)")
    p.add_argument(
        "--quick", action="store_true", help="smoke sizes: 20 calls of 0.2 s, 2 workers x 10"
    )
    p.add_argument("--json", type=Path, help=f"where the JSON goes (default: {RESULTS}/...)")
    args = p.parse_args(argv)
    if args.quick:
        args.calls, args.delay, args.workers, args.slots = 20, 0.2, 2, 10
    if min(args.calls, args.workers, args.slots) < 1 or args.delay < 0:
        p.error("--calls, --workers and --slots must be >= 1, --delay >= 0")
    if args.json is None:
        args.json = RESULTS / f"llm-calls-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    host = machine()
    console.print(host.line())
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="tenure-llm-calls-"))
    rows: list[dict[str, Any]] = []
    server = ModelServer(args.delay)
    try:
        for path in args.via:
            before = server.stats()
            if path == "executor":
                row = via_executor(server, args.calls, root)
            else:
                row = via_queue(server, args.calls, args.workers, args.slots, root, args.store)
                row["slots_note"] = slots_note(args.slots, row["slots"])
                console.print(row["slots_note"])
            after = server.stats()
            row["path"] = path
            row["requests"] = after["requests"] - before["requests"]
            row["server_max_in_flight"] = after["max_in_flight"]
            row["tasks_per_s"] = args.calls / row["wall_s"]
            row["ideal_wall_s"] = args.delay * math.ceil(args.calls / row["concurrency"])
            rows.append(row)
            server.close()
            server = ModelServer(args.delay)  # a fresh in-flight maximum for the next path
    finally:
        server.close()
    table = Table(title=f"{args.calls} model calls answered after {args.delay:g} s")
    for col in ("path", "concurrency", "wall s", "ideal s", "tasks/s", "completed",
                "requests", "max in flight", "peak RSS MB", "RSS growth MB"):  # fmt: skip
        table.add_column(col, justify="left" if col == "path" else "right")
    for r in rows:
        table.add_row(
            r["path"], str(r["concurrency"]), f"{r['wall_s']:.2f}", f"{r['ideal_wall_s']:.2f}",
            f"{r['tasks_per_s']:.1f}", str(r["completed"]), str(r["requests"]),
            str(r["server_max_in_flight"]), f"{r['peak_rss_mb']:.0f}",
            f"{r.get('rss_growth_mb', 0):.0f}" if "rss_growth_mb" in r else "-",
        )  # fmt: skip
    console.print(table)
    report_end(console, started, args, benchmark="llm_calls", host=host,
               store_kind=args.store or "sqlite", results={"rows": rows})  # fmt: skip
    console.print(f"JSON written to {args.json}")
    return 0 if all(r["completed"] == args.calls for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
