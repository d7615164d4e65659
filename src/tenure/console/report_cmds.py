"""``tenure report``: a team's run as one HTML page to keep, share or attach to an issue."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tenure.console import params
from tenure.console.app import StoreOption, app, fail, out
from tenure.console.exits import Exit
from tenure.console.report_html import render
from tenure.console.safe import safe_text
from tenure.console.stores import existing, require_team
from tenure.roles.teams.report import gather


@app.command()
def report(
    store: StoreOption = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            "-t",
            help="The team to report on (may be left out when the store has one team).",
            callback=params.team,
        ),
    ] = None,
    output: Annotated[
        str,
        typer.Option("--output", "-o", help="Where to write the page; - for standard output."),
    ] = "report.html",
) -> None:
    """Write a self-contained HTML report of a team's run: the plan as a dependency graph,
    a timeline of leaders (epochs, failovers) and attempts per member, each task's
    attempts with verdicts, the failures and their reasons, the decision log, the inbox
    history and the spend. It only reads the store, and the page loads nothing.

    Example: `tenure report --team demo -o report.html`
    """
    target = None if output == "-" else Path(output)
    if target is not None and not target.parent.is_dir():
        raise fail(
            f"--output: no directory {str(target.parent)!r} to write {target.name!r} in",
            Exit.USAGE,
        )
    with existing(store) as opened:
        require_team(opened, team)
        chosen = team or _only_team(opened.teams())
        page = render(gather(opened, chosen))
    if target is None:
        typer.echo(page, nl=False)
        return
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise fail(f"--output: cannot write {str(target)!r}: {exc.strerror or exc}") from None
    out.print(f"wrote {safe_text(target)} (team {safe_text(chosen)})")


def _only_team(teams: list[str]) -> str:
    if len(teams) == 1:
        return teams[0]
    shown = ", ".join(sorted(teams)[:20]) or "none"
    raise fail(f"--team: this store has {len(teams)} teams ({shown}); name one")
