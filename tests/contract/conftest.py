"""The contract suite runs against every backend, the in-memory one included.

Only here: the fault tests elsewhere start member processes on one store URL,
which a memory store cannot serve (each process would get a store of its own).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import BACKENDS, url_for
from tenure.store.memory import forget

CONTRACT_BACKENDS = [*BACKENDS, "memory"]


@pytest.fixture(params=CONTRACT_BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store URL for each backend; for memory, a store named for this
    test, so two ``open_store`` calls in it share one store as they would a file."""
    if request.param != "memory":
        yield url_for(request.param, tmp_path)
        return
    name = f"contract-{uuid.uuid4().hex[:12]}"
    yield f"memory://{name}"
    forget(name)
