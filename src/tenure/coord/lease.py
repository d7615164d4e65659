"""The leader's side of the lease: claim, renew, and know when to stop acting.

The store decides who holds a lease; the holder decides, on its own
monotonic clock, when it must stop acting: at the moment it sent its last
successful renewal + TTL − margin. A paused leader that wakes up after that
moment does nothing until it has renewed, and a renewal after expiry fails.

Each lease is taken with a fresh random token that only this keeper knows (the store
keeps its hash): renewing, proving and releasing need it, so a process that reads
the lease's holder and epoch out of the store cannot end or extend it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tenure.coord.lease_proof import LeaseProofs
from tenure.protocol import TenureError
from tenure.protocol.envelope import MAX_EPOCH_JUMP
from tenure.protocol.errors import LeaseLost, ProtocolError, StoreError
from tenure.store import Lease, Store, new_lease_token

MAX_CLIMB_STEPS = 1000
"""How many claims a keeper makes, at most, to lift its team's epoch counter up to its
own epoch memory (each lifts it ``MAX_EPOCH_JUMP`` at most): a memory further ahead
than that is refused as implausible."""

Grant = Callable[[str], Lease]
"""Takes a lease with the token it is given."""


@dataclass(frozen=True)
class LeaseTiming:
    ttl: float = 3.0
    margin_fraction: float = 0.2
    renew_fraction: float = 0.3

    def __post_init__(self) -> None:
        """A TTL of 0 (or NaN) would have a leader renew in a busy loop or never act."""
        if not (math.isfinite(self.ttl) and self.ttl > 0):
            raise ProtocolError("ttl", f"a positive number of seconds, got {self.ttl!r}")
        for name in ("margin_fraction", "renew_fraction"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ProtocolError(name, f"a fraction between 0 and 1, got {value!r}")

    @property
    def margin(self) -> float:
        return self.ttl * self.margin_fraction

    @property
    def renew_every(self) -> float:
        return self.ttl * self.renew_fraction

    @property
    def proof_grace(self) -> float:
        """How long a fresh lease is respected without its proof (store clock): one
        renew interval. Its claimer proves it one store round trip after the claim."""
        return self.renew_every


class LeaseKeeper:
    """Holds one team's lease for one holder and answers "may I still act?".

    ``clock`` is the holder's own monotonic clock (a test passes a ``ManualClock``,
    shared with a memory store, to move time without sleeping). With ``proofs`` every
    lease it takes is proved before it is used (``coord.lease_proof``)."""

    def __init__(
        self,
        store: Store,
        team: str,
        holder: str,
        timing: LeaseTiming,
        *,
        clock: Callable[[], float] = time.monotonic,
        proofs: LeaseProofs | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.holder = holder
        self.timing = timing
        self.clock = clock
        self.proofs = proofs
        self.lease: Lease | None = None
        self._token = ""  # the token ``lease`` is held with: never stored, shown or logged
        self._deadline = 0.0
        self._noted = 0  # the last epoch of ours found taken under our name
        self._lock = threading.Lock()

    @property
    def epoch(self) -> int:
        return self.lease.epoch if self.lease else 0

    def claim(self, *, at_least: int = 0) -> Lease:
        ttl = self.timing.ttl
        self._climb(at_least)
        return self._take(
            lambda token: self.store.claim_lease(
                self.team, self.holder, ttl, token=token, at_least=at_least
            )
        )

    def seize(self, over: Lease, *, at_least: int = 0) -> Lease:
        """Replace a lease this holder refused (``Conflict`` if it changed meanwhile)."""
        ttl = self.timing.ttl
        reach = self._reach(at_least)
        lease = self._take(
            lambda token: self.store.seize_lease(
                self.team, self.holder, ttl, over=over, token=token, at_least=reach
            )
        )
        if lease.epoch > at_least:
            return lease
        self.release()  # ours, but not above our own memory: give it back and climb
        return self.claim(at_least=at_least)

    def _reach(self, at_least: int) -> int:
        """``at_least``, or as far as one claim may lift the team's counter now."""
        if at_least <= MAX_EPOCH_JUMP:
            return at_least  # within the bound whatever the counter is
        return min(at_least, self.store.current_epoch(self.team) + MAX_EPOCH_JUMP)

    def _climb(self, at_least: int) -> None:
        """Lift the team's epoch counter to within one claim of ``at_least``.

        The store refuses a claim more than ``MAX_EPOCH_JUMP`` above its counter, so
        nobody pushes a team's epochs far in one call. A leader whose own epoch memory
        is further ahead (its store lost its state after a long life) climbs: it claims
        at the bound and gives the lease back at once, step by step, at most
        ``MAX_CLIMB_STEPS`` steps; a memory further ahead than that is refused."""
        if at_least <= MAX_EPOCH_JUMP:
            return
        counter = self.store.current_epoch(self.team)
        if at_least - counter > MAX_CLIMB_STEPS * MAX_EPOCH_JUMP:
            raise ProtocolError(
                "at_least",
                f"at most {MAX_CLIMB_STEPS * MAX_EPOCH_JUMP} above team {self.team!r}'s "
                f"epoch counter {counter}, got {at_least} (is this member's epoch memory "
                "from another store?)",
            )
        ttl = self.timing.ttl
        while at_least > (step_to := counter + MAX_EPOCH_JUMP):
            token = new_lease_token()
            step = self.store.claim_lease(
                self.team, self.holder, ttl, token=token, at_least=step_to
            )
            self.store.release_lease(self.team, self.holder, step.epoch, token=token)
            counter = step.epoch  # the counter only grows: at least this now

    def _take(self, grant: Grant) -> Lease:
        token = new_lease_token()
        sent = self.clock()
        lease = grant(token)
        if self.proofs is not None:
            lease = self._prove(lease, token, self.proofs)
        with self._lock:
            self.lease, self._token = lease, token
            self._deadline = sent + self.timing.ttl - self.timing.margin
        return lease

    def _prove(self, lease: Lease, token: str, proofs: LeaseProofs) -> Lease:
        """Attach the proof; a lease that cannot be proved is given back, never used."""
        proof = proofs.sign(self.holder, lease.epoch)
        try:
            return self.store.prove_lease(self.team, self.holder, lease.epoch, proof, token=token)
        except TenureError:
            try:
                self.store.release_lease(self.team, self.holder, lease.epoch, token=token)
            except TenureError:
                pass  # it expires by itself, or a candidate seizes it after the grace
            raise

    def renew(self) -> bool:
        """Renew once; on failure the keeper is invalid from now on."""
        with self._lock:
            lease, token = self.lease, self._token
        if lease is None or not self.valid():
            self.lost()
            return False
        sent = self.clock()
        try:
            ttl = self.timing.ttl
            self.store.renew_lease(self.team, self.holder, lease.epoch, ttl, token=token)
        except LeaseLost:
            self.lost()
            self.note_taken(lease)
            return False
        except StoreError:
            return False  # keep the old deadline; it runs out by itself
        with self._lock:
            if self.lease is lease:
                self._deadline = sent + self.timing.ttl - self.timing.margin
        return True

    def note_taken(self, lease: Lease | None = None) -> None:
        """Say so (once) when this holder's own id now holds another epoch than ``lease``
        (its last by default): someone with store access seized the lease under this
        holder's name. Called when a renewal fails, and by
        a leader stepping down because a write found a newer epoch."""
        lease = lease or self.lease
        if lease is None or self._noted == lease.epoch:
            return
        try:
            now = self.store.current_lease(self.team)
            if now is not None and now.holder == self.holder and now.epoch != lease.epoch:
                self._noted = lease.epoch
                data = {"leader": self.holder, "epoch": lease.epoch, "taken_at": now.epoch}
                self.store.append_event(self.team, "security.lease_taken", data)
        except TenureError:
            pass  # best effort: the store is away

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
        with self._lock:
            lease, token = self.lease, self._token
            self.lease, self._token, self._deadline = None, "", 0.0
        if lease is not None:
            try:
                self.store.release_lease(self.team, self.holder, lease.epoch, token=token)
            except StoreError:
                pass  # it expires by itself


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
