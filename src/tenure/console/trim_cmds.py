"""``tenure trim``: delete a team's old events, the one part of a store that only grows.

Tasks, leases and members stay; only events older than a cutoff go. The cutoff
has a floor of a minute, far above a leader's round, so no live reader of the
log (a leader's register view) can still be waiting for what is removed.
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from tenure.console.app import StoreOption, app, fail, out, store_url
from tenure.store import Store, open_store

MIN_AGE = 60.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
PAGE = 1000


def seconds_of(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d`` (or plain seconds) as seconds."""
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*", text)
    if not found:
        raise fail(f"--older-than: a duration like 90s, 30m, 12h or 7d; got {text!r}")
    return float(found[1]) * _UNITS[found[2] or "s"]


def cutoff_seq(store: Store, team: str, before: float) -> tuple[int, int]:
    """The first seq to keep (events at or after ``before`` stay) and how many go."""
    after, going = 0, 0
    while True:
        page = store.events(team, after=after, limit=PAGE)
        for event in page:
            if event.at >= before:
                return event.seq, going
            going += 1
        if len(page) < PAGE:
            return (page[-1].seq + 1 if page else after + 1), going
        after = page[-1].seq


@app.command()
def trim(
    team: Annotated[str, typer.Option("--team", "-t", help="The team whose events go.")],
    older_than: Annotated[
        str, typer.Option("--older-than", help="Events older than this go: 90s, 30m, 12h, 7d.")
    ],
    store: StoreOption = None,
    yes: Annotated[bool, typer.Option("--yes", help="Delete; without it, only count.")] = False,
) -> None:
    """Delete a team's events older than a cutoff (the register, leases and members
    stay). Without --yes it only says how many would go.

    Example: `tenure trim --team pricing --older-than 7d --yes`
    """
    age = seconds_of(older_than)
    if age < MIN_AGE:
        raise fail(f"--older-than: at least {MIN_AGE:g}s, so no running leader misses an event")
    with open_store(store_url(store)) as opened:
        if team not in opened.teams():
            known = ", ".join(opened.teams()[:10]) or "none"
            raise fail(f"the store has no team {team!r} (teams: {known})")
        keep_from, going = cutoff_seq(opened, team, opened.now() - age)
        if not yes:
            out.print(f"{going} event(s) of {team} are older than {older_than}; add --yes to delete")
            return
        removed = opened.trim_events(team, keep_from)
    out.print(f"[green]trimmed[/] {removed} event(s) of {team} older than {older_than}")
