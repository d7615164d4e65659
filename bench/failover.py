"""Failover time: SIGKILL of the leader -> first assignment of the new epoch a worker accepts.

Each run starts, on a fresh store, two leader candidates (``tenure leader``,
priorities 20 and 10) and then two workers (``tenure worker``) as real
processes, lets a plan of sleeping tasks run until a few are done, SIGKILLs
whichever candidate was elected, and reads the event log on the store clock:

    t_kill    store.now() read immediately before os.kill(SIGKILL)
    t_accept  the first ``task.transition`` event with ``to == "running"`` and an
              epoch above the killed leader's: a worker marking an envelope of the
              new leader running (a fenced compare-and-set at the new epoch)
    failover  t_accept - t_kill

It also splits that time at the new ``lease.claimed`` and the new leader's first
``task.dispatched``. Usage:

    .venv/bin/python bench/failover.py                      # 20 runs, TTL 2 s, SQLite
    .venv/bin/python bench/failover.py --runs 5 --ttl 1 --json out.json
    .venv/bin/python bench/failover.py --store redis://127.0.0.1:6379/14 --flush
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from _common import (
    EventTail,
    RunDir,
    Stores,
    bench_root,
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
from tenure.store import Event, Store, open_store

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
CANDIDATES = (("lead-a", 20), ("lead-b", 10))


@dataclass
class Run:
    run: int
    ok: bool
    error: str = ""
    killed: str = ""
    successor: str = ""
    old_epoch: int = 0
    new_epoch: int = 0
    done_at_kill: int = 0
    in_flight_at_kill: int = 0
    lease_left: float | None = None  # lease expires_at - t_kill
    member_left: float | None = None  # killed leader's membership expires_at - t_kill
    claimed: float | None = None  # new lease.claimed - t_kill
    dispatched: float | None = None  # new leader's first task.dispatched - t_kill
    failover: float | None = None  # first running mark at the new epoch - t_kill
    accepted_task: str = ""
    accepted_was_in_flight: bool = False
    # The successor ranks below the dead leader, whose membership outlived its lease:
    # the election makes it wait rank x backoff (0.5 s) before claiming.
    outranked_by_dead: bool = False
    load1: float = 0.0  # 1-minute load average when the run started


def plan_file(path: Path, team: str, tasks: int) -> Path:
    plan = {
        "team": team,
        "goal": "failover benchmark",
        "tasks": [{"id": f"t{i:03d}", "goal": "sleep"} for i in range(1, tasks + 1)],
    }
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path


def one_run(n: int, args: argparse.Namespace, stores: Stores, root: Path) -> Run:
    run_dir = RunDir(root, f"run-{n:02d}")
    team = unique_team("failover")
    url = stores.url_for(run_dir.path, f"failover-{n:02d}")
    plan = plan_file(run_dir.path / "plan.json", team, args.tasks)
    common = ["--state-dir", str(run_dir.state)]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    result = Run(run=n, ok=False, load1=os.getloadavg()[0])
    try:
        with open_store(url) as store:
            tail = EventTail(store, team)
            order = CANDIDATES[::-1] if args.order == "inverted" else CANDIDATES
            for name, priority in order:
                procs[name] = spawn_member(
                    [
                        "leader",
                        str(plan),
                        *common,
                        "--member",
                        name,
                        "--priority",
                        str(priority),
                        "--lease-ttl",
                        str(args.ttl),
                    ],
                    run_dir.log(name),
                    url,
                )
                if args.order != "race" and len(procs) == 1:
                    # The usual set-up: the highest priority leads, the other stands by.
                    wait_for(
                        f"{name} to claim the lease",
                        lambda: tail.poll_first(lambda e: e.kind == "lease.claimed"),
                        timeout=args.timeout,
                        procs=procs,
                    )
            # Both candidates campaigning before any work exists, so the standby is warm.
            wait_for(
                "both leader candidates to join",
                lambda: _joined(store, team, "lead", 2),
                timeout=args.timeout,
                procs=procs,
            )
            for w in range(1, args.workers + 1):
                name = f"w{w}"
                procs[name] = spawn_member(
                    ["worker", *common, "--team", team, "--member", name, "--exec", args.exec],
                    run_dir.log(name),
                    url,
                )
            first: Event = wait_for(
                "a leader",
                lambda: tail.poll_first(lambda e: e.kind == "lease.claimed"),
                timeout=args.timeout,
                procs=procs,
            )
            old_epoch = int(first.epoch or 0)
            killed = str(first.data["holder"])

            def ready_to_kill() -> set[str] | None:
                """The tasks assigned or running, once enough are done and one is in flight."""
                if tail.poll_count(lambda e: is_transition(e, "done")) < args.kill_after:
                    return None
                flight = {
                    t.task_id
                    for t in store.tasks(team)
                    if t.state in ("queued", "running") and t.assignee
                }
                return flight or None

            flight: set[str] = wait_for(
                f"{args.kill_after} tasks done and one in flight",
                ready_to_kill,
                timeout=args.timeout,
                procs=procs,
                interval=0.005,
            )
            # --- the kill --------------------------------------------------------------
            lease = store.current_lease(team)
            member = next((m for m in store.members(team) if m.member_id == killed), None)
            t_kill = store.now()
            procs[killed].send_signal(signal.SIGKILL)
            procs[killed].wait()
            tail.poll()
            result.killed, result.old_epoch = killed, old_epoch
            result.done_at_kill = tail.count(lambda e: is_transition(e, "done"))
            result.in_flight_at_kill = len(flight)
            if lease is None or lease.epoch != old_epoch:
                raise RuntimeError(f"lease changed hands before the kill: {lease}")
            result.lease_left = lease.expires_at - t_kill
            result.member_left = member.expires_at - t_kill if member else None

            def newer(e: Event) -> bool:
                return (e.epoch or 0) > old_epoch

            accepted: Event = wait_for(
                "a running mark at the new epoch",
                lambda: tail.poll_first(lambda e: newer(e) and is_transition(e, "running")),
                timeout=args.timeout + 10 * args.ttl,
                procs={k: v for k, v in procs.items() if k != killed},
                interval=0.005,
            )
            claim = tail.first(lambda e: newer(e) and e.kind == "lease.claimed")
            dispatch = tail.first(lambda e: newer(e) and e.kind == "task.dispatched")
            assert claim is not None
            result.successor = str(claim.data["holder"])
            priority = dict(CANDIDATES)
            result.outranked_by_dead = (
                priority[result.successor] < priority[killed]
                and result.member_left is not None
                and result.member_left > result.lease_left
            )
            result.new_epoch = int(claim.epoch or 0)
            result.claimed = claim.at - t_kill
            result.dispatched = dispatch.at - t_kill if dispatch else None
            result.failover = accepted.at - t_kill
            result.accepted_task = str(accepted.data["task_id"])
            result.accepted_was_in_flight = result.accepted_task in flight
            result.ok = True
    except (TimeoutError, RuntimeError) as exc:
        result.error = str(exc)
    finally:
        stop_all(list(procs.values()))
    if result.ok and args.keep is None:
        run_dir.remove()
    return result


def _joined(store: Store, team: str, capability: str, count: int) -> bool:
    return sum(capability in m.capabilities for m in store.members(team)) >= count


def summarize(runs: list[Run], ttl: float) -> dict[str, dict[str, float | None]]:
    ok = [r for r in runs if r.ok]

    def stats(values: list[float]) -> dict[str, float | None]:
        return {
            "median": median(values),
            "min": min(values) if values else None,
            "max": max(values) if values else None,
        }

    rows: dict[str, list[float]] = {
        "lease left at kill": [r.lease_left for r in ok if r.lease_left is not None],
        "kill -> new lease claimed": [r.claimed for r in ok if r.claimed is not None],
        "lease expiry -> claimed": [
            r.claimed - r.lease_left
            for r in ok
            if r.claimed is not None and r.lease_left is not None
        ],
        "claimed -> first dispatch": [
            r.dispatched - r.claimed
            for r in ok
            if r.dispatched is not None and r.claimed is not None
        ],
        "first dispatch -> accepted": [
            r.failover - r.dispatched
            for r in ok
            if r.failover is not None and r.dispatched is not None
        ],
        "failover (kill -> accepted)": [r.failover for r in ok if r.failover is not None],
    }
    for label, group in (
        ("failover, successor outranked by the dead leader", True),
        ("failover, successor ranked first", False),
    ):
        values = [r.failover for r in ok if r.outranked_by_dead is group and r.failover]
        if values and len(values) < len(ok):
            rows[label] = values
    summary = {name: stats(values) for name, values in rows.items()}
    fail = summary["failover (kill -> accepted)"]
    summary["failover / TTL"] = {k: (v / ttl if v is not None else None) for k, v in fail.items()}
    return summary


def print_runs(runs: list[Run]) -> None:
    table = Table(title="runs (seconds after the SIGKILL, store clock)")
    for column in (
        "run",
        "killed -> successor",
        "epoch",
        "in flight",
        "lease left",
        "claimed",
        "dispatched",
        "accepted",
        "note",
    ):
        table.add_column(
            column, justify="left" if column.startswith("killed") or column == "note" else "right"
        )
    for r in runs:
        note = (
            r.error
            if not r.ok
            else (
                f"{r.accepted_task} ({'adopted' if r.accepted_was_in_flight else 'new dispatch'})"
            )
        )
        table.add_row(
            str(r.run),
            f"{r.killed} -> {r.successor}{' (backoff)' if r.outranked_by_dead else ''}",
            f"{r.old_epoch}->{r.new_epoch}",
            str(r.in_flight_at_kill),
            fmt(r.lease_left),
            fmt(r.claimed),
            fmt(r.dispatched),
            fmt(r.failover),
            note,
        )
    console.print(table)


def print_summary(
    summary: dict[str, dict[str, float | None]], ttl: float, n_ok: int, n: int
) -> None:
    table = Table(title=f"failover, TTL {ttl:g} s: {n_ok}/{n} runs measured")
    table.add_column("interval (s)")
    for column in ("median", "min", "max", "TTL"):
        table.add_column(column, justify="right")
    for name, values in summary.items():
        bold = name.startswith("failover (")
        table.add_row(
            f"[bold]{name}[/]" if bold else name,
            fmt(values["median"]),
            fmt(values["min"]),
            fmt(values["max"]),
            f"{ttl:g}" if bold else "",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--ttl", type=float, default=2.0, help="lease TTL of both candidates")
    parser.add_argument("--tasks", type=int, default=40, help="tasks in the plan")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--exec", default="sleep:0.2", help="worker executor spec")
    parser.add_argument(
        "--order",
        choices=("priority", "inverted", "race"),
        default="priority",
        help="priority: start the priority-20 candidate, let it claim, then start the "
        "priority-10 one, so the killed leader outranks its successor (the usual set-up); "
        "inverted: the priority-10 one leads first, so the successor ranks first; "
        "race: start both at once",
    )
    parser.add_argument("--kill-after", type=int, default=3, help="done tasks before the kill")
    parser.add_argument(
        "--store",
        default=None,
        help="redis://HOST:PORT/DB, or a directory for SQLite files "
        "(default: a fresh SQLite file in a temporary directory per run)",
    )
    parser.add_argument(
        "--flush", action="store_true", help="FLUSHDB the --store Redis database before each run"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="per step, seconds")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep run directories (logs, store) under this directory",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-run table")
    args = parser.parse_args()
    stores = Stores(args.store, args.flush)
    host = machine()
    console.print(
        f"[bold]failover[/]: {args.runs} runs, TTL {args.ttl:g} s, "
        f"{stores.kind} store, {args.workers} workers ({args.exec}), "
        f"{args.tasks} tasks, kill after {args.kill_after} done, start order {args.order}"
    )
    console.print(host.line())
    root = bench_root(args.keep)
    runs: list[Run] = []
    started = time.monotonic()
    for n in range(1, args.runs + 1):
        r = one_run(n, args, stores, root)
        runs.append(r)
        status = f"{r.failover:.2f} s" if r.ok else f"[red]failed[/]: {r.error}"
        console.print(f"run {n:2d}/{args.runs}: {status}")
    if args.keep is None and all(r.ok for r in runs):
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    elif not all(r.ok for r in runs):
        console.print(f"logs and stores of the failed runs are kept in {root}")
    if not args.quiet:
        print_runs(runs)
    summary = summarize(runs, args.ttl)
    n_ok = sum(r.ok for r in runs)
    print_summary(summary, args.ttl, n_ok, len(runs))
    report_end(
        console,
        started,
        args,
        benchmark="failover",
        host=host,
        store_kind=stores.kind,
        results={"summary": summary, "runs": [asdict(r) for r in runs]},
    )
    if n_ok < len(runs):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
