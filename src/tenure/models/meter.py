"""What model calls cost, added up where no worker reports them: the planner's calls and
the leader's judges (charged to the task they judged).

A judge runs in the leader, not in a worker, so no worker reports its tokens.
``Trust`` hands out every judge model wrapped in ``Metered``, which adds each
completion to the trust's ``Meter``; the reviewer reads the meter before and
after it verifies a result and logs the difference in the task's spend, where
budgets and ``tenure status`` count it like any other model work.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tenure.models.base import ChatMessage, Completion, Model, Usage
from tenure.protocol.envelope import Spend

Mark = tuple[Usage, int, int]


@dataclass
class Meter:
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    unpriced: int = 0
    model: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, completion: Completion, model: str) -> None:
        with self._lock:
            self.usage = self.usage + completion.usage
            self.calls += 1
            self.unpriced += 0 if completion.priced else 1
            self.model = model

    def mark(self) -> Mark:
        with self._lock:
            return self.usage, self.calls, self.unpriced

    def since(self, mark: Mark) -> Spend | None:
        """The spend since ``mark``, or None when no judge was called."""
        usage, calls, unpriced = mark
        with self._lock:
            if self.calls == calls:
                return None
            return Spend(
                input_tokens=self.usage.input_tokens - usage.input_tokens,
                output_tokens=self.usage.output_tokens - usage.output_tokens,
                cost_usd=round(max(0.0, self.usage.cost_usd - usage.cost_usd), 8),
                calls=self.calls - calls,
                unpriced=self.unpriced - unpriced,
                model=self.model or None,
            )


class Metered:
    """A model that records what each of its completions cost into a ``Meter``."""

    def __init__(self, inner: Model, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter
        self.name = inner.name
        self.provider = inner.provider

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        completion = self.inner.complete(messages, json_schema=json_schema, max_tokens=max_tokens)
        self.meter.record(
            completion, f"{self.provider}:{self.name}" if self.provider else self.name
        )
        return completion
