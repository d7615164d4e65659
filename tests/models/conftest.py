"""Model tests: the guard is on, no provider settings leak in from the environment, and
a local wire-format server stands in for OpenAI and Anthropic."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any

import pytest

from tenure.models import guard

from .wire_server import Reply, WireServer

PROVIDER_ENV = (
    "TENURE_MODEL",
    "TENURE_PRICES",
    "TENURE_MODEL_TIMEOUT",
    "TENURE_MODEL_RETRIES",
    "TENURE_MODEL_STREAM",
    "TENURE_ALLOW_MODEL_REQUESTS",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENROUTER_API_KEY",
)


@pytest.fixture(autouse=True)
def _refuse_real_model_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every model test runs with the guard forced on and a clean provider environment."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    guard.set_enforced(True)
    try:
        yield
    finally:
        guard.set_enforced(None)


ServerFactory = Callable[..., WireServer]


@pytest.fixture
def wire() -> Iterator[ServerFactory]:
    """``wire([replies...])`` or ``wire(responder=fn)``: a started local server whose
    address the guard allows for the rest of the test."""
    with ExitStack() as stack:

        def start(script: Sequence[Reply] = (), **kwargs: Any) -> WireServer:
            server = stack.enter_context(WireServer(script, **kwargs))
            stack.enter_context(guard.allow_model_requests(server.base))
            return server

        yield start
