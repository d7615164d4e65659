"""What both adapters share: lazy SDK import, error mapping, usage and cost."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from tenure.models.base import ChatMessage, Usage
from tenure.models.errors import ModelError
from tenure.models.pricing import PriceTable, default_prices
from tenure.protocol.errors import ConfigError


def import_sdk(package: str, extra: str) -> ModuleType:
    """The SDK module, or one ConfigError line saying how to install it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            f"the {package} package is not installed: pip install 'tenure[{extra}]'"
        ) from None


def translate_error(
    sdk: ModuleType, exc: Exception, provider: str, model: str, url: str
) -> ModelError:
    """An SDK exception as a ModelError with a kind and a readable reason."""
    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    if isinstance(exc, sdk.APITimeoutError):
        return ModelError(
            f"no answer from {url} before the timeout",
            kind="timeout",
            provider=provider,
            model=model,
        )
    if isinstance(exc, sdk.APIConnectionError):
        return ModelError(
            f"cannot reach {url}: {detail}", kind="connection", provider=provider, model=model
        )
    if isinstance(exc, sdk.RateLimitError):
        return ModelError(
            f"rate limited (429) after retries: {detail}",
            kind="rate_limit",
            provider=provider,
            model=model,
            status=status,
        )
    if isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError):
        return ModelError(
            f"the server refused the API key ({status}): {detail}",
            kind="auth",
            provider=provider,
            model=model,
            status=status,
        )
    if isinstance(exc, sdk.APIStatusError):
        kind = "server" if isinstance(status, int) and status >= 500 else "bad_request"
        return ModelError(
            f"HTTP {status} after retries: {detail}"
            if kind == "server"
            else f"HTTP {status}: {detail}",
            kind=kind,  # type: ignore[arg-type]
            provider=provider,
            model=model,
            status=status,
        )
    return ModelError(f"{type(exc).__name__}: {exc}", provider=provider, model=model)


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
    return str(getattr(exc, "message", None) or exc)[:300]


def usage_of(
    prices: PriceTable | None,
    provider: str,
    model: str,
    input_tokens: int | None,
    output_tokens: int | None,
    messages: list[ChatMessage],
    text: str,
) -> tuple[Usage, bool]:
    """The call's usage with its cost; token counts the server left out are estimated."""
    from tenure.models.scripted import count_tokens

    tokens_in = (
        input_tokens if input_tokens is not None else sum(count_tokens(m.content) for m in messages)
    )
    tokens_out = output_tokens if output_tokens is not None else count_tokens(text)
    cost = (prices or default_prices()).cost(provider, model, tokens_in, tokens_out)
    return Usage(tokens_in, tokens_out, cost or 0.0), cost is not None


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
