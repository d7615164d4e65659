"""``ScriptedModel``: a deterministic model for tests, demos and examples.

It answers from a list (one reply per call, the last repeating) or from a
function of the conversation, and counts tokens roughly (words), so budgets
and benchmarks have something real to add up; give it a ``price`` to make
those tokens cost money (free by default).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tenure.models.base import ChatMessage, Completion, Usage
from tenure.models.pricing import Price

Reply = str | dict[str, Any] | list[Any]


def count_tokens(text: str) -> int:
    """A rough token count (words and punctuation runs); stable and cheap."""
    return max(1, len(text.split())) if text else 0


class ScriptedModel:
    provider = "scripted"

    def __init__(
        self,
        replies: Sequence[Reply] | Callable[[list[ChatMessage]], Reply],
        *,
        name: str = "scripted",
        provider: str = "scripted",
        price: Price | None = None,
    ) -> None:
        self.name = name
        self.provider = provider
        self.price = price or Price(0.0, 0.0)
        self._replies = replies
        self._lock = threading.Lock()
        self.calls: list[list[ChatMessage]] = []

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        with self._lock:
            self.calls.append(list(messages))
            index = len(self.calls) - 1
        reply = self._next(messages, index)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        tokens_in = sum(count_tokens(m.content) for m in messages)
        tokens_out = count_tokens(text)
        usage = Usage(tokens_in, tokens_out, self.price.cost(tokens_in, tokens_out))
        return Completion(text, usage, self.name, self.provider)

    def _next(self, messages: list[ChatMessage], index: int) -> Reply:
        if callable(self._replies):
            return self._replies(messages)
        if not self._replies:
            raise ValueError("ScriptedModel has no replies")
        return self._replies[min(index, len(self._replies) - 1)]
