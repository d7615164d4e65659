"""``tenure runs``: every run a store holds (a team's plan, each ``--fresh`` start of it
a run of its own, a coding run ``code/RUN``), with how it ended, when it started, how
long it went, its task counts and its spend (``runs_data``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, out
from tenure.console.jsonout import JsonOption
from tenure.console.runs_data import team_runs
from tenure.console.safe import safe_text
from tenure.console.state_cmds import age
from tenure.console.stores import existing, require_team
from tenure.console.tree import COUNTED, subtree
from tenure.protocol.secrets import redact_url

_OUTCOME_STYLE = {"done": "green", "waiting": "bold red", "running": "yellow", "stopped": "red"}


@app.command()
def runs(
    store: StoreOption = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team", "-t", help="Only this team and the teams nested in it.", callback=params.team
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the runs a store holds, newest first: each team's plan, and each `--fresh`
    start of it as a run of its own (coding runs as code/RUN), with its outcome (done,
    waiting for a person, running, stopped before it settled), start, duration, task
    counts and model spend.

    Example: `tenure runs --store sqlite:///.tenure/state.db`
    """
    with existing(store) as opened:
        require_team(opened, team)
        found = [run for name in subtree(opened.teams(), team) for run in team_runs(opened, name)]
        url = redact_url(opened.url)
    found.sort(key=lambda r: r["started_at"] or 0.0, reverse=True)
    if as_json:
        jsonout.emit("runs", store=url, runs=found)
        return
    if not found:
        out.print("no runs in this store yet; start one with [bold]tenure run PLAN[/]")
        return
    out.print(runs_table(found, url))


def runs_table(found: list[dict[str, Any]], url: str) -> Table:
    table = Table(title=f"runs in {safe_text(url)}", title_justify="left")
    for column in ("team", "run", "outcome", "started", "duration", "tasks", "spend"):
        table.add_column(column, overflow="fold")
    for run in found:
        style = _OUTCOME_STYLE.get(run["outcome"], "")
        started = run["started_at"]
        when = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M") if started else "-"
        tally = run["counts"]
        table.add_row(
            safe_text(run["team"]),
            f"#{run['run']}",
            f"[{style}]{run['outcome']}[/]" if style else run["outcome"],
            when,
            age(run["duration_seconds"]) if run["duration_seconds"] is not None else "-",
            ", ".join(f"{tally[s]} {s}" for s in COUNTED if tally.get(s)) or "-",
            _spend(run["spend"]),
        )
    return table


def _spend(spend: dict[str, Any] | None) -> str:
    if spend is None:
        return "?"  # ended by a fresh start that did not record it
    if not (spend["calls"] or spend["tokens"] or spend["cost_usd"]):
        return "-"
    return f"{spend['tokens']} tokens, ${spend['cost_usd']:.4f}"
