"""``tenure demo``: a team of scripted agents in separate processes, under fire.

Three leader candidates and three workers price five vendors. During the run
the demo SIGKILLs the leader, SIGSTOPs the next one past its TTL, replays a
delayed envelope from the paused leader, duplicates every message, and one
worker claims success without evidence. Each fault is shown being caught.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tenure.console import params
from tenure.console.app import app, out
from tenure.console.demo_setup import TEAM, prepare
from tenure.console.demo_story import Story
from tenure.console.exits import Exit
from tenure.console.processes import spawn, stop_all
from tenure.coord import Credentials
from tenure.coord.credentials import init_team
from tenure.protocol.secrets import redact_url
from tenure.roles import Mailbox, envelope_for
from tenure.roles.register import read_task
from tenure.store import Event, Store, open_store

AGENT = "python:tenure.executors.pricing_agent:pricing_agent"
STEP_TIMEOUT = 30.0


class DemoFailed(Exception):
    """A step of the demo did not happen in time."""


@app.command()
def demo(
    directory: Annotated[
        Path, typer.Option("--workdir", help="Where the demo writes its files.")
    ] = Path(".tenure/demo"),
    ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl",
            help=f"Leader lease TTL in seconds ({params.MIN_TTL:g} to {params.MAX_TTL:g}).",
            callback=params.ttl(),
        ),
    ] = 2.0,
) -> None:
    """Run a five-vendor pricing team through a leader kill, a leader pause,
    duplicated messages and a lying worker, and show each fault being caught.

    Needs nothing configured: SQLite store, scripted agents, all local.

    Example: `tenure demo --workdir /tmp/tenure-demo`
    """
    root = directory.resolve()
    plan_path = prepare(root)
    url = f"sqlite:///{root / 'state.db'}"
    out.rule("[bold]tenure demo[/]: five vendors, three leaders, three workers")
    out.print(f"files in {root}  ·  store {redact_url(url)}  ·  lease TTL {ttl:g}s\n")
    with open_store(url) as store:
        procs = _start_team(root, plan_path, url, ttl)
        story = Story(store, TEAM, out)
        started = time.monotonic()
        try:
            figures = _script(store, story, procs, ttl, root / "keys")
            _wait(story, "the plan to finish", lambda: _settled(store))
        except DemoFailed as exc:
            out.print(f"[bold red]demo step timed out:[/] {exc}; logs in {root / 'logs'}")
            raise typer.Exit(Exit.ERROR) from None
        finally:
            stop_all(list(procs.values()))
        story.poll()
        ok = _summary(store, story, figures, root, time.monotonic() - started)
    raise typer.Exit(Exit.OK if ok else Exit.ERROR)


def _start_team(root: Path, plan: Path, url: str, ttl: float) -> dict[str, subprocess.Popen[bytes]]:
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    keys = root / "keys"  # every member signs what it sends, as any multi-process team does
    init_team(keys, TEAM, [f"worker-{n}" for n in (1, 2, 3)])
    common = ["--state-dir", str(root / "members"), "--workdir", str(root), "--keys", str(keys)]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for n, flags, env in (
        (1, ["--duplicate-results"], {}),
        (2, [], {}),
        (3, [], {"TENURE_AGENT_LIES": "1"}),
    ):
        name = f"worker-{n}"
        args = ["worker", *common, "--team", TEAM, "--member", name, "--exec", AGENT, *flags]
        procs[name] = spawn(args, log=logs / f"{name}.log", env=env, store_url=url)
    for n, priority in ((1, 30), (2, 20), (3, 10)):
        name = f"leader-{n}"
        args = [
            "leader",
            str(plan),
            *common,
            "--member",
            name,
            "--priority",
            str(priority),
            "--lease-ttl",
            str(ttl),
            "--duplicate-assignments",
        ]
        procs[name] = spawn(args, log=logs / f"{name}.log", store_url=url)
    out.print(
        "started leader-1/2/3 (priorities 30/20/10, every envelope sent twice) and "
        "worker-1/2/3 (worker-1 sends every result twice; worker-3 lies on first tries)\n"
    )
    return procs


def _script(
    store: Store,
    story: Story,
    procs: dict[str, subprocess.Popen[bytes]],
    ttl: float,
    keys: Path,
) -> dict[str, Any]:
    first = _wait(story, "a first leader", lambda: story.first("leader.elected"))
    _wait(story, "a first accepted task", lambda: story.counts["done"] >= 1 or None)
    killed = str(first.data["leader"])
    out.print(f"\n[bold red]fault:[/] SIGKILL {killed} (epoch {first.epoch}) in mid-plan")
    killed_at = store.now()
    procs[killed].send_signal(signal.SIGKILL)
    second = _wait(story, "a new leader", lambda: _elected_after(story, first))
    failover = second.at - killed_at
    out.print(f"[green]failover[/] in {failover:.2f}s (TTL {ttl:g}s)\n")
    paused = str(second.data["leader"])
    _wait(story, f"{paused} to dispatch", lambda: story.first("task.dispatched", leader=paused))
    # Pause it between writes: on SQLite a member stopped inside a write transaction
    # would hold the database lock, and every other member would wait for it.
    _wait(story, f"{paused} to be idle", lambda: _idle(store, story, paused))
    out.print(f"[bold red]fault:[/] SIGSTOP {paused} (epoch {second.epoch}) past its TTL")
    procs[paused].send_signal(signal.SIGSTOP)
    third = _wait(story, "a leader after the pause", lambda: _elected_after(story, second))
    _replay_stale_envelope(store, story, paused, int(second.epoch or 0), third, keys)
    out.print(f"[bold red]fault:[/] SIGCONT {paused}: it wakes up believing it leads")
    procs[paused].send_signal(signal.SIGCONT)
    _wait(
        story, f"{paused} to step down", lambda: story.first("leader.stepped_down", leader=paused)
    )
    return {"failover": failover, "ttl": ttl, "killed": killed, "paused": paused}


def _replay_stale_envelope(
    store: Store, story: Story, paused: str, epoch: int, third: Event, keys: Path
) -> None:
    """A delayed envelope from the paused leader reaches a worker after the new election."""
    leader = str(third.data["leader"])
    dispatched = _wait(
        story, f"{leader} to dispatch", lambda: story.first("task.dispatched", leader=leader)
    )
    record = store.get_task(TEAM, str(dispatched.data["task_id"]))
    worker = str(dispatched.data["assignee"])
    envelope = envelope_for(read_task(record), epoch=epoch, assignee=worker)
    signed_as_the_paused_leader = Credentials.load(keys, TEAM, paused, "lead")
    Mailbox(store, TEAM, paused, credentials=signed_as_the_paused_leader).assign(envelope)
    out.print(
        f"[bold red]fault:[/] a delayed epoch-{epoch} envelope from {paused} reaches {worker}"
    )
    _wait(story, "the stale envelope to be refused", lambda: _refused(story, epoch) or None)


def _refused(story: Story, epoch: int) -> bool:
    kinds = ("follower.stale_envelope_ignored", "follower.fenced", "follower.assignment_outdated")
    return any(e.kind in kinds and e.data.get("epoch") == epoch for e in story.events)


def _idle(store: Store, story: Story, leader: str, quiet: float = 0.3) -> bool:
    last = max((e.at for e in story.events if e.data.get("leader") == leader), default=0.0)
    return store.now() - last >= quiet


def _elected_after(story: Story, previous: Event) -> Event | None:
    for event in story.events:
        if event.kind == "leader.elected" and (event.epoch or 0) > (previous.epoch or 0):
            return event
    return None


def _settled(store: Store) -> bool | None:
    tasks = store.tasks(TEAM)
    return (bool(tasks) and all(t.state in ("done", "blocked", "cancelled") for t in tasks)) or None


def _wait(story: Story, what: str, found: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        story.poll()
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise DemoFailed(f"waited {STEP_TIMEOUT:g}s for {what}")


def _summary(
    store: Store, story: Story, figures: dict[str, Any], root: Path, elapsed: float
) -> bool:
    counts = story.counts
    tasks = store.tasks(TEAM)
    writes = [
        e
        for e in story.events
        if e.kind == "effect.done" and e.data.get("key") == "merge:write-output"
    ]
    duplicates = counts["leader.duplicate_absorbed"] + counts["follower.duplicate_absorbed"]
    refused = (
        counts["follower.stale_envelope_ignored"]
        + counts["follower.fenced"]
        + counts["follower.assignment_outdated"]
    )
    rows = [
        (
            "leader SIGKILLed",
            f"{figures['killed']} replaced in {figures['failover']:.2f}s (TTL {figures['ttl']:g}s)",
            figures["failover"] <= 2.5 * figures["ttl"],
        ),
        (
            "leader paused past TTL",
            f"{figures['paused']} stepped down on waking; "
            f"{refused} stale/outdated envelope(s) refused",
            bool(story.first("leader.stepped_down", leader=figures["paused"])) and refused > 0,
        ),
        (
            "every message sent twice",
            f"{duplicates} duplicate(s) absorbed, none executed twice",
            duplicates > 0 and len(writes) == 1,
        ),
        (
            "worker claimed success without evidence",
            f"{counts['rejected.evidence']} claim(s) rejected and retried",
            counts["rejected.evidence"] > 0,
        ),
        (
            "plan",
            f"{sum(t.state == 'done' for t in tasks)}/{len(tasks)} tasks done in "
            f"{elapsed:.1f}s; pricing.json written {len(writes)} time(s)",
            all(t.state == "done" for t in tasks) and len(writes) == 1,
        ),
    ]
    table = Table(title="faults injected and how they were caught", title_justify="left")
    for column in ("fault", "what happened", "caught"):
        table.add_column(column)
    for fault, what, caught in rows:
        table.add_row(fault, what, "[green]yes[/]" if caught else "[red]NO[/]")
    out.print()
    out.print(table)
    _print_prices(root)
    return all(caught for *_, caught in rows)


def _print_prices(root: Path) -> None:
    path = root / "pricing.json"
    if not path.exists():
        return
    table = Table(title=f"{path.name} (unknown prices stay null)", title_justify="left")
    for column in ("vendor", "plan", "USD / user / month"):
        table.add_column(column)
    for row in json.loads(path.read_text(encoding="utf-8")):
        price = row.get("monthly_usd")
        table.add_row(
            str(row.get("vendor")), str(row.get("plan")), "null" if price is None else f"{price:g}"
        )
    out.print(table)
