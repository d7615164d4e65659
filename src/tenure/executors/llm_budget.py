"""What an LLM attempt spends, held against the envelope's budget.

The meter is separate from the executor so the budget arithmetic (the cap on each
call's ``max_tokens``, the stop when nothing is left) can be read and tested alone.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from tenure.models import ChatMessage, Completion, Model, Price, default_prices
from tenure.protocol.envelope import Budget

BUDGET_PREFIX = "budget exceeded"


@dataclass
class Meter:
    """What this attempt has spent so far, against the envelope's budget."""

    budget: Budget | None
    price: Price | None
    started: float = field(default_factory=time.monotonic)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, completion: Completion) -> None:
        self.input_tokens += completion.usage.input_tokens
        self.output_tokens += completion.usage.output_tokens
        self.cost_usd += completion.usage.cost_usd
        self.calls += 1
        self.unpriced += 0 if completion.priced else 1

    def allowance(self, messages: list[ChatMessage], wanted: int | None) -> int | None:
        """``max_tokens`` for the next call within the budget; BudgetStop if none is left."""
        budget = self.budget
        if budget is None:
            return wanted
        prompt = estimate_tokens(messages)
        limit = wanted if wanted is not None else math.inf
        if budget.wall_seconds is not None:
            elapsed = time.monotonic() - self.started
            if elapsed >= budget.wall_seconds:
                raise BudgetStop(
                    f"wall time: {elapsed:.1f}s used of the {budget.wall_seconds:g}s left"
                )
        if budget.tokens is not None:
            left = budget.tokens - self.tokens - prompt
            if left <= 0:
                raise BudgetStop(
                    f"tokens: the next call needs ~{prompt} prompt tokens, "
                    f"{budget.tokens - self.tokens} of the {budget.tokens} left"
                )
            limit = min(limit, left)
        if budget.cost_usd is not None:
            if self.price is None:
                raise BudgetStop(
                    "cost: a cost budget is set but the price table has no price for this "
                    "model; add it (TENURE_PRICES) or drop the cost limit"
                )
            left_usd = budget.cost_usd - self.cost_usd - prompt * self.price.input_per_mtok / 1e6
            if left_usd <= 0:
                raise BudgetStop(
                    f"cost: ${self.cost_usd:.4f} spent of the ${budget.cost_usd:g} left"
                )
            if self.price.output_per_mtok > 0:
                limit = min(limit, int(left_usd / self.price.output_per_mtok * 1e6))
        if limit == math.inf:
            return None
        return max(1, int(limit))

    def overrun(self) -> str | None:
        budget = self.budget
        if budget is None:
            return None
        if budget.tokens is not None and self.tokens > budget.tokens:
            return f"tokens: {self.tokens} used of the {budget.tokens} left"
        if budget.cost_usd is not None and self.cost_usd > budget.cost_usd:
            return f"cost: ${self.cost_usd:.4f} spent of the ${budget.cost_usd:g} left"
        return None

    def spend(self, model: Model) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "calls": self.calls,
            "unpriced": self.unpriced,
            "model": f"{model.provider}:{model.name}",
        }


class BudgetStop(Exception):
    """The envelope's budget leaves no room for the next call."""


def estimate_tokens(messages: list[ChatMessage]) -> int:
    """A conservative prompt size: about four characters a token."""
    return sum(len(m.content) for m in messages) // 4 + 4 * len(messages)


def price_of(model: Model) -> Price | None:
    own = getattr(model, "price", None)
    if isinstance(own, Price):
        return own
    table = getattr(model, "prices", None) or default_prices()
    price: Price | None = table.price(model.provider, model.name)
    return price
