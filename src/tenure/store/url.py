"""Choosing a backend by URL: ``sqlite:///path`` (default), ``redis://host:port/db``,
or ``memory://`` (this process only; nothing persists). The forms accepted, and why
each refusal: ``store.address``."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from tenure.protocol.errors import ConfigError, StoreMissing
from tenure.protocol.secrets import redact_url, register_url
from tenure.store.address import StoreAddress, parse_store_url
from tenure.store.base import Store

DEFAULT_URL = "sqlite:///.tenure/state.db"
ENV_VAR = "TENURE_STORE"
__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "StoreAddress",
    "default_url",
    "open_store",
    "parse_store_url",
    "sqlite_path",
]


def default_url() -> str:
    return os.environ.get(ENV_VAR) or DEFAULT_URL


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open the store a URL names (``$TENURE_STORE`` or the SQLite default when None).

    The URL is checked first (``store.address``): a wrong one is refused in one line
    and nothing is created. ``sqlite:///rel/path.db`` is relative to the working
    directory, ``sqlite:////abs/path.db`` absolute; a bare path ending in ``.db``
    also means SQLite. With ``create=False`` (commands that only read or act on an
    existing team) a SQLite file that does not exist, or a Redis prefix no team has
    written to, is ``StoreMissing``, and no file or directory is made. ``memory://`` is a new empty in-memory store each time;
    ``memory://NAME`` is the same store every time this process opens it (for tests:
    two handles on one store). No other process sees a memory store.

    The URL's password becomes a known secret of this process: it is redacted from
    everything the store keeps and Tenure shows (``protocol.secrets``).
    """
    url = url or default_url()
    register_url(url)
    address = parse_store_url(url)
    if address.kind == "sqlite":
        from tenure.store.sqlite import SQLiteStore

        assert address.path is not None
        if not create and not address.path.is_file():
            raise StoreMissing(f"no store at {address.path}")
        return SQLiteStore(address.path, url=url)
    if address.kind == "redis":
        module = _import_backend("tenure.store.redis", extra="redis")
        store: Store = module.RedisStore.from_url(url)
        if not create:
            _require_data(store, url)
        return store
    from tenure.store.memory import MemoryStore

    return MemoryStore.from_url(url)


def _require_data(store: Store, url: str) -> None:
    """A Redis store exists once a team wrote to it: a reader of a prefix (or database)
    holding no team finds no store, rather than an empty one."""
    try:
        empty = not store.teams()
    except BaseException:
        store.close()
        raise
    if empty:
        store.close()
        raise StoreMissing(f"no store at {redact_url(url)} (no team under its key prefix)")


def sqlite_path(url: str) -> Path:
    """The database file of a SQLite store URL (or bare path); ``ConfigError`` otherwise."""
    address = parse_store_url(url)
    if address.path is None:
        raise ConfigError(f"store URL {redact_url(url)!r}: not a SQLite store")
    return address.path


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
