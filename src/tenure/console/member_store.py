"""A member's store as the command opens it: outages ridden out and said on stderr,
a replaced store noticed and turned into one line and exit status 4."""

from __future__ import annotations

import threading

import typer

from tenure.console.app import err, fail
from tenure.console.exits import Exit
from tenure.console.safe import safe_text
from tenure.protocol.errors import StoreLost
from tenure.store import Store
from tenure.store.patient import PatientStore

STORE_LOST = Exit.STORE_LOST
"""Exit status of a member whose store was replaced, emptied, destroyed, or unreachable
past its patience (``TENURE_STORE_PATIENCE``)."""


def patient(store: Store, *, team: str, member: str, stop: threading.Event) -> PatientStore:
    """``store`` for one member: waits out an outage (one line when it starts, one when
    it ends) and sets ``stop`` when the store turns out to be lost."""

    def say(line: str) -> None:
        err.print(safe_text(line), soft_wrap=True)

    return PatientStore(
        store, team=team, member=member, say=say, on_lost=lambda reason: stop.set(), stop=stop
    )


def confirmed(store: PatientStore) -> None:
    """Before a member reports how it ended: the store must still be the one it opened
    (else one line, exit status 4)."""
    try:
        store.confirm()
    except StoreLost as exc:
        raise lost_exit(str(exc)) from None


def lost_exit(reason: str) -> typer.Exit:
    return fail(reason, STORE_LOST)
