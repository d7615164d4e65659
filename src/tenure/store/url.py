"""Choosing a backend by URL: ``sqlite:///path`` (default), ``redis://host:port/db``,
or ``memory://`` (this process only; nothing persists)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tenure.protocol.errors import ConfigError
from tenure.protocol.secrets import redact_url, register_url
from tenure.store.base import Store

DEFAULT_URL = "sqlite:///.tenure/state.db"
ENV_VAR = "TENURE_STORE"


def default_url() -> str:
    return os.environ.get(ENV_VAR) or DEFAULT_URL


def open_store(url: str | None = None) -> Store:
    """Open the store a URL names (``$TENURE_STORE`` or the SQLite default when None).

    ``sqlite:///rel/path.db`` is relative to the working directory,
    ``sqlite:////abs/path.db`` absolute; a bare path also means SQLite.
    ``memory://`` is a new empty in-memory store each time; ``memory://NAME`` is
    the same store every time this process opens it (for tests: two handles on one
    store). No other process sees a memory store.

    The URL's password becomes a known secret of this process: it is redacted from
    everything the store keeps and Tenure shows (``protocol.secrets``).
    """
    url = url or default_url()
    register_url(url)
    scheme = urlparse(url).scheme if "://" in url else ""
    if scheme in ("", "sqlite"):
        from tenure.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url), url=url)
    if scheme in ("redis", "rediss", "unix"):
        module = _import_backend("tenure.store.redis", extra="redis")
        store: Store = module.RedisStore.from_url(url)
        return store
    if scheme == "memory":
        from tenure.store.memory import MemoryStore

        return MemoryStore.from_url(url)
    raise ConfigError(
        f"store URL {redact_url(url)!r}: unknown scheme {scheme!r};"
        " use sqlite:///PATH, redis://HOST:PORT/DB or memory://"
    )


def sqlite_path(url: str) -> Path:
    if not url.startswith("sqlite:"):
        return Path(url)
    rest = url.removeprefix("sqlite:")
    if not rest.startswith("///"):
        raise ConfigError(
            f"store URL {redact_url(url)!r}: write sqlite:///relative/path or sqlite:////abs/path"
        )
    path = rest[3:].split("?", 1)[0]
    if not path:
        raise ConfigError(f"store URL {redact_url(url)!r}: the SQLite file path is empty")
    return Path(path)


def _import_backend(module: str, *, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or extra
        if missing.startswith("tenure"):
            raise
        raise ConfigError(
            f"the {extra} backend needs the {missing!r} package: pip install 'tenure[{extra}]'"
        ) from exc
