"""``tenure log``: the event log, newest first, or followed as it grows.

A person asking for the log wants what just happened: the newest ``--limit`` events
come first, and a closing line says how many older ones there are. ``--follow``
prints the newest ones oldest first, as ``tail -f`` does, then each new event as it
is appended, until Ctrl-C (exit 0). An event's data is shown as ``key=value``
(strings quoted when they hold spaces, nested values as compact JSON), never as a
Python repr; every value goes through ``console.safe``.
"""

from __future__ import annotations

import json
import signal
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, err, out
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.console.stores import existing, require_team
from tenure.store import Event, Store

PAGE = 1000
DEFAULT_LIMIT = 100
POLL_SECONDS = 0.2
"""How often ``--follow`` asks the store for new events."""


@app.command()
def log(
    store: StoreOption = None,
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="Only this team.", callback=params.team)
    ] = None,
    after: Annotated[
        int,
        typer.Option(help="Only events after this sequence number.", callback=params.at_least(0)),
    ] = 0,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", "-n", help="At most this many events.", callback=params.at_least(1)
        ),
    ] = DEFAULT_LIMIT,
    show_all: Annotated[
        bool, typer.Option("--all", help="Every event, not only the newest.")
    ] = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Then print new events as they arrive, until Ctrl-C."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Print the event log, newest first (the newest --limit events; --all for every one).

    With --follow the newest are printed oldest first, then every new event as it is
    appended, until Ctrl-C; with --json that is one JSON event per line.

    Example: `tenure log --team demo --limit 20`

    Example: `tenure log -f --team demo`
    """
    with existing(store) as opened:
        require_team(opened, team)
        window, older = newest(opened, team, after, None if show_all else limit)
        if follow:
            _follow(opened, team, window, as_json)
            return
    if as_json:
        events = [asdict(e) for e in reversed(window)]
        jsonout.emit("log", team=team, events=events, older=older)
        return
    if not window:
        out.print("no events yet" + (f" in team {safe_text(team)}" if team else ""))
    for event in reversed(window):
        out.print(event_line(event), soft_wrap=True)
    if older:
        out.print(f"[dim]{older} older events (use --all / --limit)[/]")


def newest(
    store: Store, team: str | None, after: int, limit: int | None
) -> tuple[list[Event], int]:
    """The newest ``limit`` events after ``after`` (all when None), oldest first, and
    how many older ones were left out."""
    kept: deque[Event] = deque(maxlen=limit)
    total = 0
    for event in _all_after(store, team, after):
        kept.append(event)
        total += 1
    return list(kept), total - len(kept)


def _all_after(store: Store, team: str | None, after: int) -> Iterator[Event]:
    while True:
        page = store.events(team, after=after, limit=PAGE)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].seq


def _follow(store: Store, team: str | None, window: list[Event], as_json: bool) -> None:
    """Print ``window``, then what is appended, until SIGINT or SIGTERM (exit 0)."""
    stop = threading.Event()
    old = {
        sig: signal.signal(sig, lambda signum, frame: stop.set())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    last = window[-1].seq if window else store_last(store, team)
    try:
        for event in window:
            _print(event, as_json)
        while not stop.is_set():
            for event in store.events(team, after=last, limit=PAGE):
                _print(event, as_json)
                last = event.seq
            stop.wait(POLL_SECONDS)
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
    err.print("stopped following the log")


def store_last(store: Store, team: str | None) -> int:
    """The newest event's seq (of ``team``, or of the whole store), 0 when none."""
    if team is not None:
        return store.last_event_seq(team)
    return max((store.last_event_seq(t) for t in store.teams()), default=0)


def _print(event: Event, as_json: bool) -> None:
    if as_json:
        jsonout.line(asdict(event))
    else:
        out.print(event_line(event), soft_wrap=True)


def event_line(event: Event) -> str:
    """``SEQ TIME TEAM EPOCH KIND key=value ...``, safe for the terminal (Rich markup)."""
    when = datetime.fromtimestamp(event.at, UTC).strftime("%H:%M:%S.%f")[:-3]
    epoch = f"e{event.epoch}" if event.epoch is not None else "  "
    details = " ".join(f"{key}={readable(value)}" for key, value in event.data.items())
    return (
        f"{event.seq:>6} {when} [dim]{safe_text(event.team)}[/] {epoch:>4} "
        f"[bold]{safe_text(event.kind)}[/] {safe_text(details)}"
    )


def readable(value: Any) -> str:
    """A value as a person reads it: a plain word bare, a string with spaces quoted,
    ``null``/``true``/``false``, a list or mapping as compact JSON."""
    if isinstance(value, str):
        bare = value and not any(c.isspace() or c in "\"'=" for c in value)
        if bare:
            return value
        # quoted, one line; other control characters are left for console.safe to show
        # (as \x1b, \r: the same form every other command shows them in)
        quoted = value.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + quoted.replace("\n", "\\n").replace("\t", "\\t") + '"'
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
