"""When model calls must stop: a deadline, a cancellation, or both.

An LLM worker's attempt has a deadline (the envelope's ``deadline_seconds``) and can be
cancelled (the member's ``ctx.cancelled``). Inside ``stopping(when)`` every request an
SDK adapter makes honours it: a request's timeout is cut to the time left, no request
(and no retry) starts once the deadline has passed or the attempt was cancelled, and a
stream is closed when either happens while it is read. The adapter then raises a
``ModelError`` of kind ``stopped``::

    with stopping(StopWhen(deadline=time.monotonic() + 30, cancelled=event)):
        model.complete(messages)

It is a context variable, so it holds for the calls made in that context (and
thread) only, whatever wraps the model on the way.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from tenure.models.errors import ModelError

__all__ = ["StopWhen", "current_stop", "stopping"]


@dataclass(frozen=True)
class StopWhen:
    """``deadline`` is a ``time.monotonic()`` instant; ``cancelled`` an event that is set
    when the work must stop. Either may be None."""

    deadline: float | None = None
    cancelled: threading.Event | None = None

    def left(self) -> float | None:
        """Seconds until the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def why(self) -> str | None:
        """Why calls must stop now, or None while they may go on."""
        if self.cancelled is not None and self.cancelled.is_set():
            return "the attempt was cancelled"
        left = self.left()
        if left is not None and left <= 0:
            return "the attempt's deadline passed"
        return None

    def check(self, provider: str = "", model: str = "") -> float | None:
        """The seconds left before the deadline; a ``stopped`` ModelError when none are."""
        why = self.why()
        if why is not None:
            raise ModelError(
                f"no request sent: {why}", kind="stopped", provider=provider, model=model
            )
        return self.left()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff), or less if the work must stop first."""
        left = self.left()
        wait = max(0.0, seconds if left is None else min(seconds, left))
        if self.cancelled is not None:
            self.cancelled.wait(wait)
        else:
            time.sleep(wait)


_current: ContextVar[StopWhen | None] = ContextVar("tenure_model_stop", default=None)


def current_stop() -> StopWhen | None:
    """The stop the calls in this context honour, if any."""
    return _current.get()


@contextmanager
def stopping(when: StopWhen) -> Iterator[StopWhen]:
    token = _current.set(when)
    try:
        yield when
    finally:
        _current.reset(token)


def backoff(retry: int, retry_after: float | None = None) -> float:
    """Seconds before retry number ``retry`` (1, 2, ...): the server's ``retry-after`` when
    it gave one (at most a minute), else exponential from half a second with jitter."""
    if retry_after is not None and 0 <= retry_after <= 60:
        return retry_after
    base: float = min(8.0, 0.5 * 2.0 ** (retry - 1))
    return base * random.uniform(0.75, 1.0)
