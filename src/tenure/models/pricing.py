"""Prices per model, so every call's cost is recorded and budgets can stop spending.

Prices are US dollars per million tokens: input, output, and input tokens read
from or written to a prompt cache (``cache_read``, ``cache_write``). The built-in
table holds the providers' published list prices for common models (2025); a user
overrides or extends it with a JSON or YAML file named by ``TENURE_PRICES`` (or
passed to :meth:`PriceTable.load`)::

    gpt-4.1: {input: 2.0, output: 8.0, cache_read: 0.5}
    "openai:qwen2.5": {input: 0, output: 0}     # a local server: free
    claude-sonnet-4-5: [3.0, 15.0]

A price without cache rates charges cached tokens as ordinary input: never less
than they may cost.

A key is ``provider:model`` or just ``model``; a model also matches the longest
key it starts with followed by ``-`` (``gpt-4.1-2025-04-14`` is priced as
``gpt-4.1``). A model found nowhere is *unpriced*: its calls cost 0 and are
counted as unpriced, and a cost budget refuses to run it rather than overrun.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenure.protocol.errors import ConfigError
from tenure.protocol.limits import MAX_PLAN_BYTES, decode_json
from tenure.protocol.yaml_guard import load_yaml

ENV_PRICES = "TENURE_PRICES"


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens: input, output, and (when the provider prices them
    apart) input read from a prompt cache and input written to one. A rate left out
    (None) charges those tokens as ordinary input."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def cost(
        self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
    ) -> float:
        """``input_tokens`` includes the ``cache_read`` and ``cache_write`` tokens."""
        read = self.input_per_mtok if self.cache_read_per_mtok is None else self.cache_read_per_mtok
        write = (
            self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        )
        plain = max(0, input_tokens - cache_read - cache_write)
        return (
            plain * self.input_per_mtok
            + cache_read * read
            + cache_write * write
            + output_tokens * self.output_per_mtok
        ) / 1e6


def _openai(input_: float, output: float, cached: float) -> Price:
    """OpenAI: cached input at its discount; writing the cache costs nothing extra."""
    return Price(input_, output, cached, input_)


def _anthropic(input_: float, output: float) -> Price:
    """Anthropic: cache reads at a tenth of input, 5-minute cache writes at 1.25 times."""
    return Price(input_, output, round(input_ * 0.1, 6), round(input_ * 1.25, 6))


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "gpt-4.1": _openai(2.0, 8.0, 0.50),
    "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "gpt-4o": _openai(2.50, 10.0, 1.25),
    "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "o3": _openai(2.0, 8.0, 0.50),
    "o4-mini": _openai(1.10, 4.40, 0.275),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.80, 4.0),
}


class PriceTable:
    """Model -> price, with ``provider:model`` keys taking precedence over ``model`` keys."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES if prices is None else prices)

    def price(self, provider: str, model: str) -> Price | None:
        for key in (f"{provider}:{model}", model):
            if key in self.prices:
                return self.prices[key]
        best: str | None = None
        for key in self.prices:
            bare = key.split(":", 1)[1] if key.startswith(f"{provider}:") else key
            if ":" in bare and not key.startswith(f"{provider}:"):
                continue  # another provider's entry
            if model.startswith(f"{bare}-") and (best is None or len(bare) > len(best)):
                best = key
        return self.prices[best] if best is not None else None

    def cost(
        self,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cache_read: int = 0,
        cache_write: int = 0,
    ) -> float | None:
        """The call's cost in USD, or None when the model has no price."""
        price = self.price(provider, model)
        if price is None:
            return None
        return price.cost(input_tokens, output_tokens, cache_read, cache_write)

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        return PriceTable({**self.prices, **overrides})

    @classmethod
    def load(cls, path: str | Path, *, base: PriceTable | None = None) -> PriceTable:
        """The built-in table (or ``base``) overridden by a JSON or YAML price file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the price table {path} ({exc.strerror}): fix {ENV_PRICES}"
            ) from None
        try:
            if path.suffix == ".json":
                data = decode_json(text, field="(prices)", limit=MAX_PLAN_BYTES)
            else:
                data = load_yaml(text, source=str(path))
        except ValueError as exc:
            raise ConfigError(f"price table {path} is not valid JSON/YAML: {exc}") from None
        return (base or cls()).with_overrides(parse_prices(data, str(path)))


PRICE_KEYS = ("input", "output", "cache_read", "cache_write")


def parse_prices(data: Any, source: str = "prices") -> dict[str, Price]:
    """``{model: {input: X, output: Y[, cache_read: R][, cache_write: W]}}`` or
    ``{model: [X, Y]}`` / ``[X, Y, R, W]`` (USD per million tokens)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a mapping of model -> {{input: USD, output: USD}}")
    out: dict[str, Price] = {}
    for key, value in data.items():
        values: Any = value
        if isinstance(value, dict):
            unknown = sorted(str(k) for k in value if k not in PRICE_KEYS)
            values = [value.get(k) for k in PRICE_KEYS] if not unknown else None
        elif isinstance(value, list | tuple) and len(value) == 2:
            values = [*value, None, None]
        if (
            not isinstance(values, list | tuple)
            or len(values) != 4
            or not all(_rate(v) for v in values[:2])
            or not all(v is None or _rate(v) for v in values[2:])
        ):
            raise ConfigError(
                f"{source}: {key}: two prices >= 0 in USD per million tokens, "
                f"as {{input: X, output: Y}} (optionally also cache_read, cache_write) "
                f"or [X, Y]; got {value!r}"
            )
        read, write = (None if v is None else float(v) for v in values[2:])
        out[str(key)] = Price(float(values[0]), float(values[1]), read, write)
    return out


def _rate(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


_cache: dict[tuple[str, float], PriceTable] = {}


def default_prices() -> PriceTable:
    """The built-in table, overridden by the file ``TENURE_PRICES`` names (re-read on change)."""
    path = os.environ.get(ENV_PRICES)
    if not path:
        return PriceTable()
    try:
        mtime = Path(path).stat().st_mtime
    except OSError:
        mtime = -1.0  # let load() say what is wrong
    key = (path, mtime)
    if key not in _cache:
        _cache[key] = PriceTable.load(path)
    return _cache[key]
