"""Prices per model, so every call's cost is recorded and budgets can stop spending.

Prices are US dollars per million tokens, input and output. The built-in table
holds the providers' published list prices for common models (2025); a user
overrides or extends it with a JSON or YAML file named by ``TENURE_PRICES`` (or
passed to :meth:`PriceTable.load`)::

    gpt-4.1: {input: 2.0, output: 8.0}
    "openai:qwen2.5": {input: 0, output: 0}     # a local server: free
    claude-sonnet-4-5: [3.0, 15.0]

A key is ``provider:model`` or just ``model``; a model also matches the longest
key it starts with followed by ``-`` (``gpt-4.1-2025-04-14`` is priced as
``gpt-4.1``). A model found nowhere is *unpriced*: its calls cost 0 and are
counted as unpriced, and a cost budget refuses to run it rather than overrun.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tenure.protocol.errors import ConfigError

ENV_PRICES = "TENURE_PRICES"


@dataclass(frozen=True)
class Price:
    """US dollars per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
    "gpt-5-nano": Price(0.05, 0.40),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4o": Price(2.50, 10.0),
    "gpt-4o-mini": Price(0.15, 0.60),
    "o3": Price(2.0, 8.0),
    "o4-mini": Price(1.10, 4.40),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.80, 4.0),
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
        self, provider: str, model: str, input_tokens: int, output_tokens: int
    ) -> float | None:
        """The call's cost in USD, or None when the model has no price."""
        price = self.price(provider, model)
        return None if price is None else price.cost(input_tokens, output_tokens)

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
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ConfigError(f"price table {path} is not valid JSON/YAML: {exc}") from None
        return (base or cls()).with_overrides(parse_prices(data, str(path)))


def parse_prices(data: Any, source: str = "prices") -> dict[str, Price]:
    """``{model: {input: X, output: Y}}`` or ``{model: [X, Y]}`` (USD per million tokens)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a mapping of model -> {{input: USD, output: USD}}")
    out: dict[str, Price] = {}
    for key, value in data.items():
        pair: Any = value
        if isinstance(value, dict):
            pair = [value.get("input"), value.get("output")]
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in pair
            )
        ):
            raise ConfigError(
                f"{source}: {key}: two prices >= 0 in USD per million tokens, "
                f"as {{input: X, output: Y}} or [X, Y]; got {value!r}"
            )
        out[str(key)] = Price(float(pair[0]), float(pair[1]))
    return out


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
