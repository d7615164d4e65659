"""Reaching Redis: URL parsing (key prefix, redacted form), the client, error translation.

This is the only place besides the scripts that knows the ``redis`` package; its
exceptions stop here and leave as ``tenure`` errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tenure.protocol.errors import ConfigError, StoreUnavailable, StoreUnreachable
from tenure.protocol.secrets import redact_url, register_url

DEFAULT_PREFIX = "tenure"
CONNECT_TIMEOUT = 3.0
SOCKET_TIMEOUT = 5.0
"""Seconds before a call gives up (override with ``?socket_timeout=``): short, so a hung
server surfaces as ``StoreUnavailable`` instead of a member stuck inside a call."""
SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True, slots=True)
class Target:
    """What a store URL names: where the server is (as redis-py reads it) and our prefix."""

    client_url: str
    prefix: str
    safe_url: str
    options: frozenset[str]


def parse_url(url: str) -> Target:
    """Split ``?prefix=`` (ours) from the options redis-py understands; the URL's
    password becomes a known secret of this process (``protocol.secrets``)."""
    register_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"store URL is malformed: {exc}") from exc
    if parts.scheme not in SCHEMES:
        raise ConfigError(
            f"store URL {redact(url)!r}: a Redis URL starts with redis://, rediss:// or unix://"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "prefix"]
    prefix = prefixes[-1] if prefixes else DEFAULT_PREFIX
    if not prefix:
        raise ConfigError(f"store URL {redact(url)!r}: prefix= is empty; omit it or name one")
    kept = [(name, value) for name, value in query if name != "prefix"]
    base = url.split("?", 1)[0]  # not urlunsplit: it would drop the '//' of unix:///path
    client_url = f"{base}?{urlencode(kept)}" if kept else base
    return Target(client_url, prefix, redact(url), frozenset(name for name, _ in kept))


def redact(url: str) -> str:
    """The URL with its credentials replaced by ``***`` (for messages and logs): the
    one ``protocol.secrets.redact_url`` every part of Tenure shows URLs with."""
    return redact_url(url)


def make_client(target: Target) -> Any:
    """A pooled, thread-safe client with string replies and no automatic retries.

    Retrying a script whose reply was lost could apply it twice (a second
    ``send``, a claim answered with ``Conflict``), so a failure surfaces once as
    ``StoreUnavailable`` and the caller decides. Stale pooled connections are
    replaced before use by redis-py itself.
    """
    options: dict[str, Any] = {
        "decode_responses": True,
        "retry": Retry(NoBackoff(), 0),
    }
    if "socket_connect_timeout" not in target.options:
        options["socket_connect_timeout"] = CONNECT_TIMEOUT
    if "socket_timeout" not in target.options:
        options["socket_timeout"] = SOCKET_TIMEOUT
    try:
        return redis.Redis.from_url(target.client_url, **options)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"store URL {target.safe_url!r}: {exc}") from exc


@contextmanager
def translated(safe_url: str) -> Iterator[None]:
    """Turn every redis-py exception into ``StoreUnavailable`` naming the (redacted) URL;
    a server that did not answer (refused, cut, timed out, still loading) is
    ``StoreUnreachable``, worth waiting for."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnreachable(f"cannot reach Redis at {safe_url}: {exc}") from exc
    except redis.RedisError as exc:
        raise StoreUnavailable(f"Redis at {safe_url} failed: {exc}") from exc
    except OSError as exc:  # a socket error redis-py did not wrap
        raise StoreUnreachable(f"cannot reach Redis at {safe_url}: {exc}") from exc


class Keys:
    """Every key this store touches, under ``<prefix>:`` then ``{<team>}``.

    Store-wide: ``seq`` (event counter), ``teams`` (set: a team is added with its
    first event), ``identity`` (the token drawn when the store was made), and
    ``events``, the stream of all teams that earlier versions wrote beside each
    team's (no longer written: every event is one entry of its team's stream, and a
    read of all teams merges them by seq). Per team: ``events``, ``team`` (hash: epoch counter and
    lease), ``m:exp`` / ``m:high`` / ``m:info`` (members), ``tasks`` (creation
    order), ``task:<id>``, ``fx:<key>``, ``q:<queue>`` / ``qv:<queue>`` (stream
    and visibility deadlines), ``dead`` (dead letters of every queue).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.seq = f"{prefix}:seq"
        self.events = f"{prefix}:events"
        self.teams = f"{prefix}:teams"
        self.identity = f"{prefix}:identity"

    def team(self, team: str, suffix: str) -> str:
        return f"{self.prefix}:{{{team}}}:{suffix}"

    def task(self, team: str, task_id: str) -> str:
        return self.team(team, f"task:{task_id}")

    def effect(self, team: str, key: str) -> str:
        return self.team(team, f"fx:{key}")

    def queue(self, team: str, queue: str) -> str:
        """A queue's stream; its visibility zset and holders hash are ``queue_keys``."""
        return self.team(team, f"q:{queue}")

    def queue_keys(self, team: str, queue: str) -> list[str]:
        """The stream, the visibility zset (id -> visible again at) and the holders hash."""
        return [
            self.queue(team, queue),
            self.team(team, f"qv:{queue}"),
            self.team(team, f"qh:{queue}"),
        ]

    def common(self, team: str) -> list[str]:
        """The five keys every script starts with (see ``scripts.PRELUDE``)."""
        return [
            self.seq,
            self.events,
            self.teams,
            self.team(team, "events"),
            self.team(team, "team"),
        ]
