"""The one exception tree of Tenure.

Every error Tenure raises is a ``TenureError``; backend-native errors
(sqlite3, redis) are translated at the store boundary and never reach a
caller::

    TenureError
    ├── ProtocolError          a message, plan, id or URL is malformed (names the field)
    ├── ConfigError            a setting is missing or wrong (says what to set)
    └── StoreError             the store refused or failed an operation
        ├── StoreUnavailable   the backend cannot be reached or is broken
        ├── StaleEpoch         a write carried an epoch older than the team's current one
        ├── Conflict           a compare-and-set found a different state or version
        ├── NotFound           the task, member or message does not exist
        ├── LeaseLost          the caller no longer holds the lease it tried to use
        └── EffectInProgress   another live holder is running this side effect
"""

from __future__ import annotations


class TenureError(Exception):
    """Root of every error Tenure raises."""


class ProtocolError(TenureError, ValueError):
    """Input that breaks the protocol: names the offending field and what was expected."""

    def __init__(self, field: str, expected: str, *, source: str | None = None) -> None:
        self.field = field
        self.expected = expected
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {expected}")


class ConfigError(TenureError):
    """A setting is missing or wrong; the message says what to set."""


class StoreError(TenureError):
    """The store refused or failed an operation."""


class StoreUnavailable(StoreError):
    """The backend cannot be reached, is locked for too long, or is corrupt."""


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


class NotFound(StoreError):
    """The task, member or message named does not exist."""


class LeaseLost(StoreError):
    """The caller does not hold the lease it tried to renew or use."""


class EffectInProgress(StoreError):
    """Another live holder has claimed this side effect and has not finished it."""
