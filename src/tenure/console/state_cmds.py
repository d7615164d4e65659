"""``tenure status``: the tree of teams, then each team's leader, epoch, members and
register (``--json``: the same as data)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, out
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.console.stores import existing, require_team
from tenure.console.team_data import team_data
from tenure.console.tree import subtree, team_tree_table
from tenure.protocol.clip import clip
from tenure.protocol.secrets import redact_url
from tenure.protocol.words import counted
from tenure.roles.register import Task
from tenure.roles.register import spend as budget
from tenure.roles.register.revision import latest_revision
from tenure.roles.teams import reading
from tenure.store import Member, Store

_STATE_ORDER = {
    "blocked": 0,
    "failed": 1,
    "running": 2,
    "review": 3,
    "queued": 4,
    "cancelled": 5,
    "done": 6,
    "tampered": 0,
}
_STATE_STYLE = {
    "blocked": "bold red",
    "failed": "red",
    "running": "yellow",
    "review": "cyan",
    "queued": "white",
    "cancelled": "dim",
    "done": "green",
    "tampered": "bold red",
}


REASON_CHARS = 100
"""A reason in the register table: cut at a word boundary past this many characters
(``tenure status --json`` and ``tenure decisions`` give it whole)."""

def age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def sorted_tasks(tasks: list[Task]) -> list[Task]:
    """Blocked first, then by state, oldest first within a state."""
    return sorted(
        tasks, key=lambda t: (_STATE_ORDER.get(reading.state_of(t), 9), t.updated_at)
    )


def _member(member: Member) -> str:
    """A live member as ``status`` lists it; one with several slots says how many are free."""
    name = safe_text(member.member_id)
    if member.slots == 1:
        return name
    return f"{name} ({member.free_slots} of {member.slots} slots free)"


def team_table(store: Store, team: str) -> Table:
    now = store.now()
    lease = store.current_lease(team)
    leader = safe_text(lease.holder) if lease else "vacant"
    members = ", ".join(_member(m) for m in store.members(team)) or "none"
    table = Table(
        title=f"team [bold]{safe_text(team)}[/] — leader {leader} — "
        f"epoch {lease.epoch if lease else store.current_epoch(team)}",
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
        state = reading.state_of(task)
        style = _STATE_STYLE.get(state, "")
        table.add_row(
            safe_text(task.task_id),
            f"[{style}]{safe_text(state)}[/]",
            str(task.attempt),
            safe_text(task.assignee or "-"),
            age(now - task.updated_at),
            *((str(budget.task_totals(task)),) * spent),
            safe_text(clip(_reason(task, states), REASON_CHARS)),
        )
    if spent or any(t.spec.team_budget or t.spec.planning_spend for t in tasks):
        table.caption = f"live members: {members}\n{spend_line(tasks, now)}"
    changelog = plan_line(store, team, now)
    if changelog:
        table.caption = f"{table.caption}\n{changelog}"
    return table


def plan_line(store: Store, team: str, now: float) -> str:
    """The plan's revision and its last change (who, when, why, what), if it was replanned."""
    latest = latest_revision(store, team)
    if latest is None or latest.revision == 1:
        return ""
    if latest.mode == "fresh":
        return safe_text(
            f"plan revision {latest.revision}: started over {age(now - latest.at)} ago by "
            f"{latest.by}"
        )
    what = (
        f"{len(latest.added)} added, {len(latest.dropped)} dropped, {len(latest.changed)} changed"
    )
    why = f": {latest.reason}" if latest.reason else ""
    return safe_text(
        f"plan revision {latest.revision}, replanned {age(now - latest.at)} ago by "
        f"{latest.by} ({what}){why}"
    )


def spend_line(tasks: list[Task], now: float) -> str:
    """The team's model spend (planning included) against its budget, if it has one."""
    totals = budget.team_totals(tasks)
    calls = counted(totals.calls, "call")
    line = f"spend: {counted(totals.tokens, 'token')}, ${totals.cost_usd:.4f} in {calls}"
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


def reasons(store: Store, team: str) -> dict[str, str]:
    """Why each task of ``team`` is where it is, as ``status`` shows it."""
    tasks = reading.tasks(store, team)
    states: dict[str, str] = {t.task_id: t.state for t in tasks}
    return {t.task_id: _reason(t, states) for t in tasks}


def _reason(task: Task, states: dict[str, str]) -> str:
    """Why a task is where it is; a queued task names the dependencies it waits for."""
    if task.tamper is not None:
        return f"{task.problem} (claimed by {task.tamper.claimed})"
    if task.state == "queued" and not task.assignee:
        waiting = [
            f"{d} ({states.get(d, '?')})" for d in task.spec.depends_on if states.get(d) != "done"
        ]
        if waiting:
            return "waits for " + ", ".join(waiting)
    return task.reason


@app.command()
def status(
    store: StoreOption = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team", "-t", help="Only this team and the teams nested in it.", callback=params.team
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show the tree of teams, then each team's leader, epoch, members and task register.

    Example: `tenure status --store sqlite:///.tenure/state.db --team acme/research`
    """
    with existing(store) as opened:
        require_team(opened, team)
        teams = subtree(opened.teams(), team)
        if as_json:
            jsonout.emit(
                "status",
                store=redact_url(opened.url),
                teams=[team_data(opened, name, reasons(opened, name)) for name in teams],
            )
            return
        if not teams:
            out.print("no teams in this store yet; start one with [bold]tenure run PLAN[/]")
        if len(teams) > 1:
            out.print(team_tree_table(opened, teams))
        for name in teams:
            out.print(team_table(opened, name))
