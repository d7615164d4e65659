"""Housekeeping: the parts of a store that only grow.

``tenure trim`` deletes a team's events older than a cutoff (tasks, leases and
members stay). The cutoff has a floor of a minute, far above a leader's round,
so no live reader of the log (a leader's register view) can still be waiting
for what is removed. ``tenure dead-letters`` shows the messages a team gave up
on (delivered too often without an ack) and drops them on request.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, out
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.console.stores import existing, require_team
from tenure.protocol.clip import clip
from tenure.store import Store

MIN_AGE = 60.0
MAX_AGE = 36_500 * 86_400.0  # a hundred years: the store's clock cannot go further back
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
PAGE = 1000


def seconds_of(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d`` (or plain seconds) as seconds."""
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*", text)
    if not found:
        raise params.FlagError(f"a duration like 90s, 30m, 12h or 7d, got {text!r}")
    return float(found[1]) * _UNITS[found[2] or "s"]


def _older_than(ctx: typer.Context, value: str | None) -> str | None:
    """``--older-than``: a duration of at least a minute, checked like every flag."""
    if value is None or ctx.resilient_parsing:
        return value
    age = seconds_of(value)
    if age < MIN_AGE:
        raise params.FlagError(
            f"at least {MIN_AGE:g}s, so no running leader misses an event, got {value!r}"
        )
    if age > MAX_AGE:
        raise params.FlagError(f"at most {MAX_AGE / 86_400:.0f}d, got {value!r}")
    return value


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
    team: Annotated[
        str, typer.Option("--team", "-t", help="The team whose events go.", callback=params.team)
    ],
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Events older than this go: 90s, 30m, 12h, 7d.",
            callback=_older_than,
        ),
    ],
    store: StoreOption = None,
    yes: Annotated[bool, typer.Option("--yes", help="Delete; without it, only count.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a team's events older than a cutoff (the register, leases and members
    stay). Without --yes it only says how many would go.

    Example: `tenure trim --team pricing --older-than 7d --yes`
    """
    age = seconds_of(older_than)
    with existing(store) as opened:
        require_team(opened, team)
        keep_from, going = cutoff_seq(opened, team, opened.now() - age)
        if not yes:
            if as_json:
                jsonout.emit("trim", team=team, older_than=older_than, older=going, removed=0)
                return
            out.print(
                f"{going} event(s) of {team} are older than {older_than}; add --yes to delete"
            )
            return
        removed = opened.trim_events(team, keep_from)
    if as_json:
        jsonout.emit("trim", team=team, older_than=older_than, older=going, removed=removed)
        return
    out.print(f"[green]trimmed[/] {removed} event(s) of {team} older than {older_than}")


@app.command("dead-letters")
def dead_letters(
    team: Annotated[
        str,
        typer.Option("--team", "-t", help="The team whose dead letters.", callback=params.team),
    ],
    store: StoreOption = None,
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    drop: Annotated[bool, typer.Option("--drop", help="Delete them (with --yes).")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm --drop.")] = False,
    as_json: JsonOption = False,
) -> None:
    """List the messages a team gave up on after too many deliveries, oldest first;
    with --drop --yes, delete them once read. A payload no member could decode (too
    large, too deep, not JSON) shows why instead.

    Example: `tenure dead-letters --team pricing` then `tenure dead-letters --team pricing --drop --yes`
    """
    with existing(store) as opened:
        require_team(opened, team)
        found = opened.dead_letters(team, queue)
        if drop and yes:
            removed = opened.drop_dead_letters(team, queue)
            if as_json:
                jsonout.emit(
                    "dead-letters", team=team, queue=queue, dead_letters=found, dropped=removed
                )
                return
            out.print(f"[green]dropped[/] {removed} dead letter(s) of {team}")
            return
    if as_json:
        jsonout.emit("dead-letters", team=team, queue=queue, dead_letters=found, dropped=0)
        return
    if not found:
        out.print(f"no dead letters in {team}" + (f" queue {queue}" if queue else ""))
        return
    table = Table(title=f"dead letters of {team}", title_justify="left")
    for column in ("message", "queue", "deliveries", "sent", "payload"):
        table.add_column(column, overflow="fold")
    for letter in found:
        sent = datetime.fromtimestamp(letter.sent_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        payload = (
            f"(undecodable) {letter.problem}"
            if letter.problem
            else json.dumps(letter.payload, default=str)
        )
        preview = clip(payload, 120)
        table.add_row(
            safe_text(letter.message_id),
            safe_text(letter.queue),
            str(letter.delivery_count),
            sent,
            safe_text(preview),
        )
    out.print(table)
    if drop:
        out.print(f"add --yes to delete these {len(found)} dead letter(s)")
