"""Read-only views of a store: ``tenure status`` and ``tenure log``."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from tenure.console.app import StoreOption, app, out, store_url
from tenure.console.safe import plain, safe_text
from tenure.console.tree import subtree, team_tree_table
from tenure.roles.register import Task
from tenure.roles.register import spend as budget
from tenure.roles.teams import reading
from tenure.store import Store, open_store

_STATE_ORDER = {
    "blocked": 0,
    "failed": 1,
    "running": 2,
    "review": 3,
    "queued": 4,
    "cancelled": 5,
    "done": 6,
}
_STATE_STYLE = {
    "blocked": "bold red",
    "failed": "red",
    "running": "yellow",
    "review": "cyan",
    "queued": "white",
    "cancelled": "dim",
    "done": "green",
}


def age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def sorted_tasks(tasks: list[Task]) -> list[Task]:
    """Blocked first, then by state, oldest first within a state."""
    return sorted(tasks, key=lambda t: (_STATE_ORDER.get(t.state, 9), t.updated_at))


def team_table(store: Store, team: str) -> Table:
    now = store.now()
    lease = store.current_lease(team)
    leader = f"{safe_text(lease.holder)} (epoch {lease.epoch})" if lease else "vacant"
    members = ", ".join(safe_text(m.member_id) for m in store.members(team)) or "none"
    table = Table(
        title=f"team [bold]{safe_text(team)}[/] — leader {leader} — "
        f"epoch {store.current_epoch(team)}",
        caption=f"live members: {members}",
        title_justify="left",
        caption_justify="left",
    )
    tasks = reading.tasks(store, team)
    # model work: show what it cost (a team of scripts or commands records no tokens)
    spent = any(e.calls or e.cost_usd for t in tasks for e in t.data.spend_log)
    columns = ("task", "state", "attempt", "assignee", "age", *(("spend",) * spent), "reason")
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column == "task")
    states: dict[str, str] = {t.task_id: t.state for t in tasks}
    for task in sorted_tasks(tasks):
        style = _STATE_STYLE.get(task.state, "")
        table.add_row(
            safe_text(task.task_id),
            f"[{style}]{safe_text(task.state)}[/]",
            str(task.attempt),
            safe_text(task.assignee or "-"),
            age(now - task.updated_at),
            *((str(budget.task_totals(task)),) * spent),
            safe_text(_reason(task, states)[:80]),
        )
    if spent or any(t.spec.team_budget or t.spec.planning_spend for t in tasks):
        table.caption = f"live members: {members}\n{spend_line(tasks, now)}"
    return table


def spend_line(tasks: list[Task], now: float) -> str:
    """The team's model spend (planning included) against its budget, if it has one."""
    totals = budget.team_totals(tasks)
    line = f"spend: {totals.tokens} tokens, ${totals.cost_usd:.4f} in {totals.calls} call(s)"
    if totals.unpriced:
        line += f" ({totals.unpriced} unpriced, counted as $0)"
    limits = next((t.spec.team_budget for t in tasks if t.spec.team_budget), None)
    if limits:
        caps = []
        if limits.tokens is not None:
            caps.append(f"{limits.tokens} tokens")
        if limits.cost_usd is not None:
            caps.append(f"${limits.cost_usd:g}")
        if limits.wall_seconds is not None:
            caps.append(f"{limits.wall_seconds:g}s (used {budget.team_seconds(tasks, now):.0f}s)")
        line += f" — team budget: {', '.join(caps)}"
    return line


def _reason(task: Task, states: dict[str, str]) -> str:
    """Why a task is where it is; a queued task names the dependencies it waits for."""
    if task.state == "queued" and not task.assignee:
        waiting = [
            f"{d} ({states.get(d, '?')})"
            for d in task.spec.depends_on
            if states.get(d) != "done"
        ]
        if waiting:
            return "waits for " + ", ".join(waiting)
    return task.reason


@app.command()
def status(
    store: StoreOption = None,
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="Only this team and the teams nested in it.")
    ] = None,
) -> None:
    """Show the tree of teams, then each team's leader, epoch, members and task register.

    Example: `tenure status --store sqlite:///.tenure/state.db --team acme/research`
    """
    with open_store(store_url(store)) as opened:
        teams = subtree(opened.teams(), team)
        if not teams:
            out.print("no teams in this store yet; start one with [bold]tenure run PLAN[/]")
        if len(teams) > 1:
            out.print(team_tree_table(opened, teams))
        for name in teams:
            out.print(team_table(opened, name))


@app.command()
def log(
    store: StoreOption = None,
    team: Annotated[str | None, typer.Option("--team", "-t", help="Only this team.")] = None,
    after: Annotated[int, typer.Option(help="Only events after this sequence number.")] = 0,
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print the event log, oldest first.

    Example: `tenure log --team demo --limit 50`
    """
    with open_store(store_url(store)) as opened:
        for event in opened.events(team, after=after, limit=limit):
            if as_json:
                out.print(plain(json.dumps(asdict(event))), soft_wrap=True, markup=False)
                continue
            when = datetime.fromtimestamp(event.at, UTC).strftime("%H:%M:%S.%f")[:-3]
            epoch = f"e{event.epoch}" if event.epoch is not None else "  "
            details = " ".join(f"{k}={v}" for k, v in event.data.items())
            out.print(
                f"{event.seq:>6} {when} [dim]{safe_text(event.team)}[/] {epoch:>4} "
                f"[bold]{safe_text(event.kind)}[/] {safe_text(details)}",
                soft_wrap=True,
            )
