"""What every part of the Redis backend shares: the client, the scripts, the clock."""

from __future__ import annotations

import json
import secrets
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Self

from tenure.protocol.errors import ProtocolError, StaleEpoch, StoreUnavailable
from tenure.protocol.secrets import redact_value
from tenure.store.base import Store
from tenure.store.redis.connection import Keys, make_client, parse_url, translated
from tenure.store.redis.scripts import SCRIPTS, script_body

MICRO = 1_000_000
MAX_SECONDS = 100 * 365 * 24 * 3600
"""Longer TTLs are cut to a century so microsecond times stay exact in Lua doubles."""


class RedisBase(Store):
    """Holds the client and the registered scripts; one EVALSHA per operation."""

    distributed: ClassVar[bool] = True
    shared_across_processes: ClassVar[bool] = True

    def __init__(self, url: str) -> None:
        self.url = url
        self.target = parse_url(url)
        self.safe_url = self.target.safe_url
        self.prefix = self.target.prefix
        self.keys = Keys(self.prefix)
        self.client: Any = make_client(self.target)
        self._identity: str | None = None  # read on the first ``lost_reason``
        # register_script hashes locally; redis-py loads a script on NOSCRIPT only.
        self._scripts: dict[str, Any] = {
            name: self.client.register_script(script_body(body)) for name, body in SCRIPTS.items()
        }

    @classmethod
    def from_url(cls, url: str) -> Self:
        """``redis://[:password@]host:port/db``, ``rediss://`` for TLS, ``?prefix=`` for keys."""
        return cls(url)

    # --- plumbing ------------------------------------------------------------------------

    def _run(self, name: str, team: str, keys: list[str], args: list[Any]) -> list[Any]:
        """Run one script: the common keys plus ``keys``; ``team`` then ``args`` as ARGV."""
        with translated(self.safe_url):
            reply = self._scripts[name](
                keys=[*self.keys.common(team), *keys], args=[team, *args], client=self.client
            )
        if not isinstance(reply, list) or not reply:
            raise StoreUnavailable(f"Redis at {self.safe_url}: script {name} answered {reply!r}")
        return reply

    def _liveness_keys(self, team: str) -> list[str]:
        """The member expiry zset and incarnation hash: what a hold is tied to."""
        return [self.keys.team(team, "m:exp"), self.keys.team(team, "m:inc")]

    def _translated(self) -> AbstractContextManager[None]:
        """Guard a direct command (not a script): redis errors become tenure errors."""
        return translated(self.safe_url)

    def _stale(self, team: str, epoch: int, reply: list[Any]) -> None:
        if reply[0] == "stale":
            raise StaleEpoch(team, epoch, int(reply[1]))

    # --- clock ---------------------------------------------------------------------------

    def clock_is_remote(self) -> bool:
        return True

    def now(self) -> float:
        with translated(self.safe_url):
            seconds, micros = self.client.time()
        return int(seconds) + int(micros) / MICRO

    # --- identity ------------------------------------------------------------------------

    def lost_reason(self) -> str | None:
        """The store's identity token is written once (the first member to open a prefix
        draws it) and read back on every check: a FLUSHALL, a wipe of the prefix or a
        server restarted without its data leaves no token, another store another one."""
        key = self.keys.identity
        with translated(self.safe_url):
            if self._identity is None:
                self.client.set(key, new_token(), nx=True)
                self._identity = str(self.client.get(key))
                return None
            found = self.client.get(key)
        if found is None:
            return f"Redis store {self.safe_url} was emptied (its identity key is gone)"
        if found != self._identity:
            return (
                f"Redis store {self.safe_url} was replaced: it is not the store this member opened"
            )
        return None

    def close(self) -> None:
        with translated(self.safe_url):
            self.client.close()


def new_token() -> str:
    return secrets.token_hex(16)


def micros(field: str, seconds: float) -> int:
    """A positive duration as whole microseconds (at least one)."""
    if not seconds > 0:
        raise ProtocolError(field, f"a positive number of seconds, got {seconds!r}")
    return max(1, round(min(float(seconds), MAX_SECONDS) * MICRO))


def at(value: Any) -> float:
    """A server time in microseconds as seconds."""
    return int(value) / MICRO


def dumps(value: Any) -> str:
    """``value`` as stored: JSON, with every known secret redacted (``protocol.secrets``)."""
    return json.dumps(redact_value(value), default=str, separators=(",", ":"))
