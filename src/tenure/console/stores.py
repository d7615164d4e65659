"""Opening the store a command names, for commands that must not create one.

``status``, ``log``, ``inbox``, ``decisions`` and the commands acting on an existing
team (``answer``, ``cancel``, ``trim``, ``dead-letters``) open it with ``existing``:
no file or directory is made for a mistyped path, and a missing store or team is one
line naming what there is instead of an empty answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tenure.console.app import fail, store_url
from tenure.protocol.errors import StoreMissing
from tenure.protocol.secrets import redact_url
from tenure.store import Store, open_store

START_HINT = "start a team with tenure run or tenure leader"
SHOWN_TEAMS = 20


@contextmanager
def existing(option: str | None) -> Iterator[Store]:
    """The store ``--store`` (or the default) names, which must already exist."""
    try:
        opened = open_store(store_url(option), create=False)
    except StoreMissing as exc:
        raise fail(f"{exc} ({START_HINT})") from None
    with opened:
        yield opened


def require_team(store: Store, team: str | None) -> None:
    """Refuse a team the store has never seen (nor any team nested in it), naming those it has."""
    if team is None:
        return
    teams = sorted(store.teams())
    if team in teams or any(t.startswith(team + "/") for t in teams):
        return
    shown = ", ".join(teams[:SHOWN_TEAMS]) + (", ..." if len(teams) > SHOWN_TEAMS else "")
    raise fail(f"no team {team!r} in {redact_url(store.url)}; teams: {shown or 'none'}")
