"""The embedded SQLite backend (the default; no server to install)."""

from tenure.store.sqlite.backend import SQLiteStore

__all__ = ["SQLiteStore"]
