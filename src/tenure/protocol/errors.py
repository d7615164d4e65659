"""The one exception tree of Tenure.

Every error Tenure raises is a ``TenureError``; backend-native errors
(sqlite3, redis) are translated at the store boundary and never reach a
caller::

    TenureError
    ├── ProtocolError          a message, plan, id or URL is malformed (names the field)
    │   └── UnreadableFile     a file the caller named cannot be opened or read
    ├── ConfigError            a setting is missing or wrong (says what to set)
    └── StoreError             the store refused or failed an operation
        ├── StoreUnavailable   the backend cannot be reached or is broken
        │   └── StoreUnreachable   it did not answer (down, paused, locked): worth waiting for
        ├── StoreLost          the store was replaced, emptied or destroyed, or gone too long
        ├── StoreMissing       a command that only reads found no store at the URL
        ├── StaleEpoch         a write carried an epoch older than the team's current one
        ├── Conflict           a compare-and-set found a different state or version
        │   └── MemberIdTaken  another live process holds this member id
        ├── NotFound           the task, member or message does not exist
        ├── LeaseLost          the caller no longer holds the lease it tried to use
        └── EffectInProgress   another live holder is running this side effect
"""

from __future__ import annotations

import math


class TenureError(Exception):
    """Root of every error Tenure raises."""


class ProtocolError(TenureError, ValueError):
    """Input that breaks the protocol: names the offending field and what was expected."""

    def __init__(self, field: str, expected: str, *, source: str | None = None) -> None:
        self.field = _one_line(field)  # a field path may hold a key the input chose
        self.expected = expected
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{self.field}: {expected}")


class UnreadableFile(ProtocolError):
    """A file the caller named (a plan, a message) cannot be opened or read: missing, no
    permission, a directory. The command line calls it a usage error (exit status 2)."""

    def __init__(self, path: str, reason: str | None, *, what: str = "file") -> None:
        super().__init__("(file)", f"a readable {what} ({reason or 'cannot be read'})", source=path)


def _one_line(text: str) -> str:
    """``text`` with line breaks and other control characters shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ConfigError(TenureError):
    """A setting is missing or wrong; the message says what to set."""


class StoreError(TenureError):
    """The store refused or failed an operation."""


class StoreUnavailable(StoreError):
    """The backend cannot be reached, is locked for too long, or is corrupt."""


class StoreUnreachable(StoreUnavailable):
    """The backend did not answer (connection refused or cut, a timeout, a lock held too
    long): the state may be intact, so a member waits for it instead of giving up."""


class StoreLost(StoreError):
    """The store this member opened is not there any more (its file deleted, truncated or
    replaced; a Redis emptied or restarted without its data), or stayed unreachable past
    the member's patience: the member stops and reports no success."""


class StoreMissing(StoreError):
    """No store exists where the URL points, and the caller must not create one."""


class StaleEpoch(StoreError):
    """A fenced write carried an epoch older than the team's current epoch."""

    def __init__(self, team: str, epoch: int, current: int) -> None:
        self.team = team
        self.epoch = epoch
        self.current = current
        super().__init__(
            f"team {team!r}: epoch {epoch} is stale (current epoch is {current}); write refused"
        )


class Conflict(StoreError):
    """A compare-and-set found a state or version other than the one expected."""


class MemberIdTaken(Conflict):
    """A join (or heartbeat) with a member id another live incarnation holds: two
    processes under one id would both run every side effect sent to it."""

    def __init__(self, team: str, member_id: str, *, beat_ago: float, wait: float) -> None:
        self.team = team
        self.member_id = member_id
        self.beat_ago = max(0.0, beat_ago)
        self.wait = max(0.0, wait)
        super().__init__(
            f"member id {member_id} is live in team {team} (last heartbeat "
            f"{self.beat_ago:.0f} s ago); choose another --member or wait {math.ceil(self.wait)} s"
        )


class NotFound(StoreError):
    """The task, member or message named does not exist."""


class LeaseLost(StoreError):
    """The caller does not hold the lease it tried to renew or use."""


class EffectInProgress(StoreError):
    """Another live holder has claimed this side effect and has not finished it."""

    def __init__(self, key: str, holder: str) -> None:
        self.key = key
        self.holder = holder
        super().__init__(f"effect {key!r} is being run by {holder!r}")
