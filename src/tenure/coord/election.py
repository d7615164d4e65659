"""Election by rank: when the lease is vacant, the best candidate claims first.

Timing only orders the attempts; the store's compare-and-set decides. Two
candidates that both think they are first still get one holder per epoch.

A live lease is respected only if its proof verifies (``coord.lease_proof``):
one whose proof is false, or missing past the grace, was not made by the team's
leadership, and a candidate seizes it at once (a compare-and-set on the refused
lease, so of two candidates seizing it one wins) and says so in a
``security.lease_refused`` event: once per refused lease (holder and epoch), however
many rounds it takes to seize it. Unsigned (no proofs), every lease is respected.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from tenure.coord.lease import LeaseKeeper
from tenure.protocol import TenureError
from tenure.protocol.errors import Conflict
from tenure.store import Lease, Member, Store

LEAD_CAPABILITY = "lead"
REPORTED_KEPT = 64
"""How many refused leases a candidate remembers having reported (the newest)."""


def rank_of(members: list[Member], member_id: str) -> int:
    """0 for the highest-priority live candidate; ties broken by id."""
    candidates = sorted(
        (m for m in members if LEAD_CAPABILITY in m.capabilities),
        key=lambda m: (-m.priority, m.member_id),
    )
    for rank, member in enumerate(candidates):
        if member.member_id == member_id:
            return rank
    return len(candidates)


class Election:
    def __init__(
        self,
        store: Store,
        keeper: LeaseKeeper,
        *,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.keeper = keeper
        self.backoff = backoff
        self.sleep = sleep
        self._reported: deque[tuple[str, int]] = deque(maxlen=REPORTED_KEPT)

    def try_lead(self, highest_seen: int) -> Lease | None:
        """One round: wait rank × backoff, then claim if the lease is still vacant
        (or seize it if it holds a lease the team's leadership did not make)."""
        team, me = self.keeper.team, self.keeper.holder
        held = self.store.current_lease(team)
        if held is not None:
            return self.overrule(held, highest_seen)
        rank = rank_of(self.store.members(team), me)
        if rank:
            self.sleep(rank * self.backoff)
            held = self.store.current_lease(team)
            if held is not None:
                return self.overrule(held, highest_seen)
        try:
            return self.keeper.claim(at_least=highest_seen)
        except Conflict:
            return None

    def claim_now(self, highest_seen: int) -> Lease:
        """Claim without a rank (a leader someone else chose): seize a refused lease,
        else claim; ``Conflict`` while a lease to respect is live."""
        held = self.store.current_lease(self.keeper.team)
        if held is not None:
            seized = self.overrule(held, highest_seen)
            if seized is not None:
                return seized
        return self.keeper.claim(at_least=highest_seen)

    def overrule(self, held: Lease, highest_seen: int) -> Lease | None:
        """Seize ``held`` if its proof is refused; None while it is to be respected, or
        when it changed first (another candidate seized it, or its holder proved it)."""
        reason = self.refusal(held)
        if reason is None:
            return None
        self._refused(held, reason)
        try:
            return self.keeper.seize(held, at_least=highest_seen)
        except Conflict:
            return None

    def refusal(self, held: Lease) -> str | None:
        """Why ``held`` is not to be respected, or None (always None unsigned)."""
        keeper = self.keeper
        proofs = keeper.proofs
        if proofs is None:
            return None
        mine = keeper.lease is not None and keeper.lease.epoch == held.epoch
        if held.holder == keeper.holder and held.proof is None and not mine:
            return f"a lease in {held.holder!r}'s name at epoch {held.epoch} it never claimed"
        return proofs.refused(self.store, held, keeper.timing.proof_grace)

    def _refused(self, held: Lease, reason: str) -> None:
        """Say once that ``held`` is refused; the next rounds seize it without a word."""
        if (held.holder, held.epoch) in self._reported:
            return
        data = {
            "leader": self.keeper.holder,
            "claimed": held.holder,
            "epoch": held.epoch,
            "reason": reason,
        }
        try:
            self.store.append_event(self.keeper.team, "security.lease_refused", data)
        except TenureError:
            return  # best effort: said in a later round, or the seizure below says it
        self._reported.append((held.holder, held.epoch))
