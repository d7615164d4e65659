"""A clock a test moves by hand, for a store whose clock can be injected (``MemoryStore``).

Leases, member TTLs, visibility timeouts and effect claims then expire when the
test says so, without sleeping::

    clock = ManualClock()
    store = MemoryStore(clock=clock)
    lease = store.claim_lease("team", "lead", ttl=10, token="a-token-only-its-holder-knows")
    clock.advance(10)
    assert store.current_lease("team") is None
"""

from __future__ import annotations

import threading

from tenure.protocol.errors import ProtocolError


class ManualClock:
    """Seconds that pass only on ``advance`` or ``set``; callable like ``time.time``."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        # not 0: a time that is falsy would hide a caller testing "if expires_at:"
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def __call__(self) -> float:
        return self.now()

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (never back); returns the new time."""
        if not seconds >= 0:
            raise ProtocolError("seconds", f"a number of seconds >= 0, got {seconds!r}")
        with self._lock:
            self._now += float(seconds)
            return self._now

    def set(self, t: float) -> None:
        """Jump to ``t``; backwards too, as a wall clock can (a store must cope)."""
        with self._lock:
            self._now = float(t)

    def __repr__(self) -> str:
        return f"ManualClock({self.now()!r})"
