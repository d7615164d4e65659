"""``tenure watch``: a live view for operators, and its one-snapshot form.

On a terminal it is a Textual app (``watch_app``; the ``tui`` extra); with
``--once``, ``--json`` or an output that is not a terminal (a pipe, a file, CI) it
prints one snapshot and exits, so a script sees the same facts. It opens the store
as the read-only commands do: a missing store is refused, never created.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, fail, out
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.console.state_cmds import age
from tenure.console.stores import existing, require_team
from tenure.console.watch_data import Snapshot, Watcher
from tenure.protocol.clip import clip

INSTALL_HINT = "tenure watch needs the textual package: pip install 'tenure[tui]'"


@app.command()
def watch(
    store: StoreOption = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team", "-t", help="Only this team and the teams nested in it.", callback=params.team
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option(help="Seconds between refreshes.", callback=params.seconds(0.1))
    ] = 0.5,
    once: Annotated[
        bool, typer.Option("--once", help="Print one snapshot and exit (no live view).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Watch teams live: the tree of teams (leader, epoch, lease left), members (busy,
    idle, dead), tasks by state, the inbox, spend against budgets and the event feed.

    Keys: `a` answers the selected inbox task, `c` cancels the selected task (each
    asks in a dialog; Escape gives up), `r` refreshes, `tab` moves between panes, `q`
    quits. When the output is not a terminal it prints one snapshot instead.

    Example: `tenure watch --store sqlite:///.tenure/state.db --team acme`
    """
    with existing(store) as opened:
        require_team(opened, team)
        watcher = Watcher(opened, team)
        if as_json:
            jsonout.emit("watch", **snapshot_json(watcher.snapshot()))
            return
        if once or not sys.stdout.isatty():
            print_snapshot(watcher.snapshot())
            return
        try:
            from tenure.console.watch_app import WatchApp
        except ImportError as exc:
            if (exc.name or "").split(".")[0] != "textual":
                raise
            raise fail(INSTALL_HINT) from None
        WatchApp(watcher, interval).run()


def snapshot_json(snap: Snapshot) -> dict[str, Any]:
    """One snapshot as ``watch --json`` prints it (after ``version`` and ``command``)."""
    found = asdict(snap)
    for row, spend in zip(found["spend"], snap.spend, strict=True):
        row["limits"] = spend.limits.model_dump(mode="json") if spend.limits else None
    return found


def print_snapshot(snap: Snapshot) -> None:
    """The same facts as the live view, as Rich tables, once."""
    scope = safe_text(snap.root) if snap.root else "all teams"
    out.print(f"[bold]tenure watch[/] — {scope} — {snap.live_members} live member(s)")
    out.print(_table("teams", ("team", "leader", "epoch", "lease left", "tasks"), _team_rows(snap)))
    out.print(
        _table(
            "members",
            ("team", "member", "state", "task"),
            [
                [m.team, m.member_id + (" (leader)" if m.leader else ""), m.state, m.task or "-"]
                for m in snap.members
            ],
        )
    )
    inbox = [
        [i.team, i.task_id, i.state, age(i.waiting), str(i.attempts), i.why] for i in snap.inbox
    ]
    out.print(_table("inbox", ("team", "task", "state", "waiting", "attempts", "why"), inbox))
    tasks = [
        [
            t.team,
            t.task_id,
            t.state,
            f"{t.attempts}/{t.max_attempts}",
            age(t.age),
            clip(t.reason, 80),
        ]
        for t in snap.tasks
    ]
    out.print(_table("tasks", ("team", "task", "state", "attempts", "age", "reason"), tasks))
    spend = [[s.team, str(s.tokens), f"${s.cost_usd:.4f}", _limits(s.limits)] for s in snap.spend]
    out.print(_table("spend", ("team", "tokens", "cost", "budget"), spend))
    feed = [[str(e.seq), e.team, e.kind, clip(e.details, 120)] for e in snap.feed[-20:]]
    out.print(_table("events", ("seq", "team", "kind", "details"), feed))


def _team_rows(snap: Snapshot) -> list[list[str]]:
    rows = []
    for row in snap.teams:
        name = row.team if row.depth == 0 else row.team.rsplit("/", 1)[1]
        left = "-" if row.lease_left is None else f"{max(0.0, row.lease_left):.1f}s"
        counts = ", ".join(f"{n} {state}" for state, n in row.counts.items()) or "-"
        rows.append(["  " * row.depth + name, row.leader or "vacant", str(row.epoch), left, counts])
    return rows


def _limits(limits: Any) -> str:
    if limits is None:
        return "-"
    caps = [
        f"{v:g}{unit}"
        for v, unit in (
            (limits.tokens, " tokens"),
            (limits.cost_usd, " USD"),
            (limits.wall_seconds, "s"),
        )
        if v is not None
    ]
    return ", ".join(caps) or "-"


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(safe_text(cell) for cell in row))
    return table
