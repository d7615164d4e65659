"""Errors of the model layer.

``ModelError`` is a ``TenureError`` (see ``tenure.protocol.errors`` for the tree);
SDK exceptions (openai, anthropic, httpx) are translated into it at the adapter
boundary, so callers never see a provider's own exception types::

    TenureError
    └── ModelError              a model call failed; ``kind`` says how
        └── ModelRequestRefused a real model call was attempted while tests run

A call stopped by its attempt's deadline or cancellation (``tenure.models.stop``) is
kind ``stopped``: not retried, and not a failure of the model.

Missing or wrong settings (no model, unknown provider, no key, unreachable
server) are ``ConfigError``: one line saying what to set.
"""

from __future__ import annotations

from typing import Literal

from tenure.protocol.errors import TenureError

ErrorKind = Literal[
    "rate_limit",
    "server",
    "timeout",
    "connection",
    "auth",
    "bad_request",
    "cut_short",
    "empty",
    "refused_by_guard",
    "stopped",
    "error",
]
RETRYABLE: frozenset[str] = frozenset(
    {"rate_limit", "server", "timeout", "connection", "cut_short"}
)


class ModelError(TenureError):
    """A model call failed after the SDK's own retries; ``kind`` says how."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind = "error",
        provider: str = "",
        model: str = "",
        status: int | None = None,
    ) -> None:
        self.kind = kind
        self.provider = provider
        self.model = model
        self.status = status
        who = f"{provider}:{model}: " if provider and model else ""
        super().__init__(f"{who}{message}")

    @property
    def retryable(self) -> bool:
        """True when a later attempt may well succeed (rate limit, 5xx, timeout, cut stream)."""
        return self.kind in RETRYABLE


class ModelRequestRefused(ModelError):
    """A real model request was attempted while the test suite runs, without permission."""
