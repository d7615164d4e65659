"""The A2A SDK (``a2a-sdk``): imported only where an A2A feature is used, with one
install hint when it is missing."""

from __future__ import annotations

import importlib.util
from typing import Any

from tenure.protocol.errors import ConfigError

INSTALL_HINT = "the a2a-sdk package is not installed: pip install 'tenure[a2a]'"


def require_a2a(*, server: bool = False) -> None:
    """One ConfigError line saying how to install the SDK (and, for ``server``, the
    HTTP server it runs on) when it is missing."""
    needed = ["a2a", "httpx"] + (["starlette", "sse_starlette", "uvicorn"] if server else [])
    for name in needed:
        if importlib.util.find_spec(name) is None:
            raise ConfigError(f"{INSTALL_HINT} (missing: {name})")


def whole_numbers(value: Any) -> Any:
    """``value`` with whole floats made ints again: a data part stores every number as
    a double, so ``3`` arrives as ``3.0`` and a plan's counts would be refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(each) for key, each in value.items()}
    if isinstance(value, list):
        return [whole_numbers(each) for each in value]
    return value
