"""The trust tests run on the real SQLite store (the runtime is the same on every backend;
the store contract suite covers the backends)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure.store import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        yield opened
    finally:
        opened.close()
