"""Shared fixtures: a store per backend, real files and real servers only.

A backend whose server is missing is skipped on a laptop and FAILS in CI
(``CI=true``), so a green CI run always means the backend was exercised.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure.store import Store, open_store

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REDIS_URL = os.environ.get("TENURE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
BACKENDS = ["sqlite", "redis"]


def redis_or_skip() -> str:
    """The test Redis URL, flushed; skip (or fail in CI) when no server answers."""
    if importlib.util.find_spec("tenure.store.redis") is None:
        pytest.skip("the redis backend is not part of this build")
    try:
        import redis
    except ImportError:
        message = "redis client missing: pip install 'tenure[redis]'"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        message = f"no Redis server at {REDIS_URL} ({exc}); start redis-server to run this test"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    client.flushdb()
    client.close()
    return REDIS_URL


def url_for(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    if backend == "redis":
        return redis_or_skip()
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store URL for each backend."""
    return url_for(request.param, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"
