"""The leader's side of the lease: claim, renew, and know when to stop acting.

The store decides who holds a lease; the holder decides, on its own
monotonic clock, when it must stop acting: at the moment it sent its last
successful renewal + TTL − margin. A paused leader that wakes up after that
moment does nothing until it has renewed, and a renewal after expiry fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tenure.protocol.errors import LeaseLost, StoreError
from tenure.store import Lease, Store


@dataclass(frozen=True)
class LeaseTiming:
    ttl: float = 3.0
    margin_fraction: float = 0.2
    renew_fraction: float = 0.3

    @property
    def margin(self) -> float:
        return self.ttl * self.margin_fraction

    @property
    def renew_every(self) -> float:
        return self.ttl * self.renew_fraction


class LeaseKeeper:
    """Holds one team's lease for one holder and answers "may I still act?".

    ``clock`` is the holder's own monotonic clock (a test passes a ``ManualClock``,
    shared with a memory store, to move time without sleeping)."""

    def __init__(
        self,
        store: Store,
        team: str,
        holder: str,
        timing: LeaseTiming,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.team = team
        self.holder = holder
        self.timing = timing
        self.clock = clock
        self.lease: Lease | None = None
        self._deadline = 0.0
        self._lock = threading.Lock()

    @property
    def epoch(self) -> int:
        return self.lease.epoch if self.lease else 0

    def claim(self, *, at_least: int = 0) -> Lease:
        sent = self.clock()
        lease = self.store.claim_lease(self.team, self.holder, self.timing.ttl, at_least=at_least)
        with self._lock:
            self.lease = lease
            self._deadline = sent + self.timing.ttl - self.timing.margin
        return lease

    def renew(self) -> bool:
        """Renew once; on failure the keeper is invalid from now on."""
        lease = self.lease
        if lease is None or not self.valid():
            self.lost()
            return False
        sent = self.clock()
        try:
            self.store.renew_lease(self.team, self.holder, lease.epoch, self.timing.ttl)
        except LeaseLost:
            self.lost()
            return False
        except StoreError:
            return False  # keep the old deadline; it runs out by itself
        with self._lock:
            if self.lease is lease:
                self._deadline = sent + self.timing.ttl - self.timing.margin
        return True

    def valid(self) -> bool:
        return self.lease is not None and self.clock() < self._deadline

    def remaining(self) -> float:
        return max(0.0, self._deadline - self.clock())

    def check(self) -> int:
        """The epoch to act under, or ``LeaseLost`` if the holder must stop now."""
        lease = self.lease
        if lease is None or not self.valid():
            raise LeaseLost(f"team {self.team!r}: {self.holder!r} is past its lease deadline")
        return lease.epoch

    def lost(self) -> None:
        with self._lock:
            self._deadline = 0.0

    def keep_renewed(self) -> Renewer:
        """Start renewing on a thread of its own, well inside the TTL; ``stop()`` it."""
        renewer = Renewer(self)
        renewer.start()
        return renewer

    def release(self) -> None:
        lease = self.lease
        self.lost()
        if lease is not None:
            try:
                self.store.release_lease(self.team, self.holder, lease.epoch)
            except StoreError:
                pass  # it expires by itself
        self.lease = None


class Renewer:
    """Renews a keeper's lease every ``renew_every`` seconds while the keeper is valid:
    the one renew loop every leader uses (team leaders, sub-leaders, coding runs)."""

    def __init__(self, keeper: LeaseKeeper) -> None:
        self.keeper = keeper
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"tenure-renew-{keeper.team}-{keeper.holder}"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.keeper.timing.ttl)

    def pause(self) -> None:
        """Stop renewing without waiting (a test's way to make a leader look paused)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.keeper.timing.renew_every):
            if self.keeper.lease is not None and self.keeper.valid():
                self.keeper.renew()
