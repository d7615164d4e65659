"""Every exit status of the ``tenure`` command, in one place.

The table in ``docs/operations.md`` (Exit status) lists the same codes; a test keeps
the two in step. ``tenure run``, ``leader``, ``code`` and ``worker`` end with these.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

__all__ = ["EXPLAINED", "Exit", "settled_exit"]


class Exit(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    WAITING = 3
    STORE_LOST = 4
    NO_WORKER_LEFT = 5
    HANGUP = 129
    INTERRUPTED = 130
    TERMINATED = 143


EXPLAINED: dict[Exit, str] = {
    Exit.OK: "done: every task is done (or there was nothing to do); a member (`tenure "
    "leader`, `tenure worker`) stopped by SIGTERM or SIGINT (also when a step that outlived "
    "its 5 s grace was abandoned); `tenure log --follow` ended by Ctrl-C",
    Exit.ERROR: "refused or failed: an invalid plan or message (one over a [size limit]"
    "(protocol.md#size-limits) too), a refused replan, flags that "
    "do not go together (`--model` without `--sub-leader`), no store at the path, an unknown "
    "team or task, a store that cannot be reached, a run that stopped before it was done "
    "(its leader failed; a coding run whose leader lost its lease, say)",
    Exit.USAGE: "a usage error, before anything starts: a bad flag value, a wrong store URL, "
    "a bad team path, an unknown option or command, a file named on the command line that "
    "cannot be read (a plan or message file missing, unreadable or a directory: `run`, "
    "`leader`, `code`, `replan`, `validate`, `keys init --plan`)",
    Exit.WAITING: "the team settled with tasks waiting for a person (blocked or failed, in "
    "`tenure inbox`): `run`, `leader`, `code`",
    Exit.STORE_LOST: "`run`, `leader`, `worker`: the store was replaced, emptied or destroyed, "
    "or stayed unreachable past `TENURE_STORE_PATIENCE` ([When the store goes away]"
    "(#when-the-store-goes-away))",
    Exit.NO_WORKER_LEFT: "`run`: a team has no worker left (each exited; a line for each says why)",
    Exit.HANGUP: "`run` or `code` stopped by SIGHUP; its members stopped first",
    Exit.INTERRUPTED: "interrupted (Ctrl-C) in a command that does not stop on signals "
    "(`tenure run`, `tenure code`): a line says what it stops, another that it stopped; "
    "`run` and `code` stop their members first; a member (`leader`, `worker`) given a "
    "second Ctrl-C while it stops, which stops it at once",
    Exit.TERMINATED: "`run` or `code` stopped by SIGTERM; its members stopped first; a "
    "member given a second SIGTERM while it stops",
}


def settled_exit(states: Iterable[str]) -> Exit:
    """A settled team's status: ``WAITING`` while any task waits for a person (blocked,
    failed, or finished but set aside as tampered with: ``reading.state_of``)."""
    waiting = ("blocked", "failed", "tampered")
    return Exit.WAITING if any(s in waiting for s in states) else Exit.OK
