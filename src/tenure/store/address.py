"""What a store URL names, checked before anything is opened or created.

Parsing is pure: a wrong URL is refused here, with one line naming the (redacted) URL
and the form expected, so no file, directory or connection is ever made for a typo.

Accepted forms::

    sqlite:///relative/path.db   relative to the working directory
    sqlite:////absolute/path.db
    path/to/state.db             a bare path ending in .db, .sqlite or .sqlite3
    redis://[[user]:password@]HOST[:PORT][/DB][?prefix=NAME&...]   rediss:// for TLS
    unix:///path/to/redis.sock[?db=N&prefix=NAME]
    memory://  or  memory://NAME  (this process only)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, parse_qsl, urlsplit

from tenure.protocol.errors import ConfigError
from tenure.protocol.secrets import redact_url

Kind = Literal["sqlite", "redis", "memory"]
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
REDIS_SCHEMES = ("redis", "rediss", "unix")
REDIS_OPTIONS = frozenset(
    {
        "prefix",
        "db",
        "socket_timeout",
        "socket_connect_timeout",
        "health_check_interval",
        "max_connections",
        "retry_on_timeout",
        "socket_keepalive",
        "client_name",
        "username",
        "password",
        "protocol",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_check_hostname",
    }
)
_SECONDS_OPTIONS = ("socket_timeout", "socket_connect_timeout", "health_check_interval")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
FORMS = "sqlite:///PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, unix:///SOCKET or memory://"


@dataclass(frozen=True, slots=True)
class StoreAddress:
    """A checked store URL: its backend and, for SQLite, the database file."""

    url: str
    kind: Kind
    path: Path | None = None


def parse_store_url(url: str) -> StoreAddress:
    """The backend and target ``url`` names, or ``ConfigError`` (one line) saying why not."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"store URL is empty; use {FORMS}")
    if "\x00" in url or any(ch in url for ch in "\r\n\t"):
        raise _bad(url, "it holds a control character")
    scheme = url.split(":", 1)[0].lower() if _SCHEME.match(url) else ""
    if scheme == "sqlite":
        return StoreAddress(url, "sqlite", _sqlite_path(url))
    if scheme in REDIS_SCHEMES:
        _check_redis(url)
        return StoreAddress(url, "redis")
    if scheme == "memory":
        _check_memory(url)
        return StoreAddress(url, "memory")
    if scheme and "://" in url:
        raise _bad(url, f"unknown scheme {scheme!r}; use {FORMS}")
    return StoreAddress(url, "sqlite", _bare_path(url))


def _bad(url: str, why: str) -> ConfigError:
    return ConfigError(f"store URL {redact_url(url)!r}: {why}")


def _sqlite_path(url: str) -> Path:
    rest = url.split(":", 1)[1]
    if not rest.startswith("///"):
        hint = rest.lstrip("/") or "PATH"
        raise _bad(url, f"write sqlite:///{hint} (relative) or sqlite:////abs/{hint} (absolute)")
    path = rest[3:]
    if "?" in path or "#" in path:
        raise _bad(url, "a SQLite URL takes no options (nothing after '?' or '#')")
    return _file_path(url, path)


def _bare_path(url: str) -> Path:
    if _SCHEME.match(url) or not url.lower().endswith(SQLITE_SUFFIXES):
        raise _bad(
            url,
            f"not a store URL; use {FORMS} (a bare path must end in {', '.join(SQLITE_SUFFIXES)})",
        )
    return _file_path(url, url)


def _file_path(url: str, path: str) -> Path:
    if not path.strip():
        raise _bad(url, "the SQLite file path is empty")
    if path.endswith("/") or Path(path).name in ("", ".", ".."):
        raise _bad(url, "the SQLite path names a directory; name the database file")
    return Path(path)


def _check_redis(url: str) -> None:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _bad(url, f"{exc}; write redis://HOST:PORT/DB") from None
    try:
        port = parts.port
    except ValueError:
        raise _bad(url, "the port is a number from 1 to 65535") from None
    if not url.lower().startswith(f"{parts.scheme}://"):
        raise _bad(url, f"write {parts.scheme}://HOST:PORT/DB")
    if parts.fragment:
        raise _bad(url, "a Redis URL has no '#' part")
    options = _redis_options(url, parts)
    if parts.scheme == "unix":
        if not parts.path.strip("/"):
            raise _bad(url, "the socket path is missing; write unix:///path/to/redis.sock")
        return
    if not parts.hostname:
        raise _bad(
            url, "the host is missing; write redis://HOST:PORT/DB, e.g. redis://127.0.0.1:6379/0"
        )
    if port == 0:
        raise _bad(url, "the port is a number from 1 to 65535")
    db = parts.path.lstrip("/")
    if parts.path not in ("", "/") and not db.isdigit():
        raise _bad(url, f"the database is a number after the host (/0, /1...), got {db!r}")
    if db and "db" in options:
        raise _bad(url, "the database is given twice (in the path and in ?db=)")


def _redis_options(url: str, parts: SplitResult) -> dict[str, str]:
    try:
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise _bad(url, "the options after '?' are NAME=VALUE pairs joined by '&'") from None
    options = dict(query)
    unknown = sorted(set(options) - REDIS_OPTIONS)
    if unknown:
        raise _bad(url, f"unknown option {unknown[0]!r}; known: {', '.join(sorted(REDIS_OPTIONS))}")
    if "db" in options and not options["db"].isdigit():
        raise _bad(url, f"db= is a number, got {options['db']!r}")
    for name in _SECONDS_OPTIONS:
        if name in options and not _positive(options[name]):
            raise _bad(url, f"{name}= is a positive number of seconds, got {options[name]!r}")
    return options


def _positive(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return 0 < value < float("inf")


def _check_memory(url: str) -> None:
    rest = url.split(":", 1)[1]
    if not rest.startswith("//"):
        raise _bad(url, "an in-memory store is memory:// or memory://NAME")
    name = rest[2:]
    if name and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise _bad(
            url,
            "memory://NAME: letters, digits, '.', '_' or '-', starting with one of the first two",
        )
