"""No real model calls while the test suite runs, unless a test says so.

While pytest runs a test (``PYTEST_CURRENT_TEST`` is set, and inherited by any
process a test starts) every adapter asks :func:`check_request` before it sends
anything, and a request to a server that was not explicitly allowed raises
:class:`ModelRequestRefused`. A test allows its own local wire-format server with
``allow_model_requests("http://127.0.0.1:PORT")`` or, for a child process, with
``TENURE_ALLOW_MODEL_REQUESTS=http://127.0.0.1:PORT`` (comma-separated; ``1``
allows everything, e.g. to run the suite against a real provider on purpose).

Outside tests the guard does nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from tenure.models.errors import ModelRequestRefused
from tenure.protocol.secrets import redact_url

ENV_ALLOW = "TENURE_ALLOW_MODEL_REQUESTS"
ENV_ENFORCE = "TENURE_REFUSE_MODEL_REQUESTS"
_EVERYTHING = {"1", "true", "yes", "all", "*"}
_lock = threading.Lock()
_allowed: list[str] = []
_enforced: bool | None = None  # None: decide by environment (pytest running)


def enforcing() -> bool:
    """True when requests need permission: under pytest, or when forced on."""
    if _enforced is not None:
        return _enforced
    return "PYTEST_CURRENT_TEST" in os.environ or os.environ.get(ENV_ENFORCE, "") in _EVERYTHING


def set_enforced(value: bool | None) -> None:
    """Force the guard on (True) or off (False); None returns to the environment's say."""
    global _enforced
    _enforced = value


def _target(url: str) -> str:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{(parts.hostname or '').lower()}:{port}"


def _permits(entry: str, url: str) -> bool:
    entry = entry.strip()
    if not entry:
        return False
    if entry.lower() in _EVERYTHING:
        return True
    return _target(entry) == _target(url)


def check_request(provider: str, url: str) -> None:
    """Refuse a request to ``url`` while tests run, unless a test allowed it."""
    if not enforcing():
        return
    with _lock:
        entries = [*_allowed, *os.environ.get(ENV_ALLOW, "").split(",")]
    if any(_permits(entry, url) for entry in entries):
        return
    shown = redact_url(url)
    raise ModelRequestRefused(
        f"a real {provider} request to {shown} was refused: the test suite is running; "
        f"a test that means it uses allow_model_requests({shown!r}) or sets {ENV_ALLOW}",
        kind="refused_by_guard",
        provider=provider,
    )


@contextmanager
def allow_model_requests(*targets: str) -> Iterator[None]:
    """Allow requests to these base URLs (or ``host:port``; ``"*"`` for all) inside the block."""
    with _lock:
        _allowed.extend(targets)
    try:
        yield
    finally:
        with _lock:
            for target in targets:
                _allowed.remove(target)
