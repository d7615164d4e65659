"""Election by rank: when the lease is vacant, the best candidate claims first.

Timing only orders the attempts; the store's compare-and-set decides. Two
candidates that both think they are first still get one holder per epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tenure.coord.lease import LeaseKeeper
from tenure.protocol.errors import Conflict
from tenure.store import Lease, Member, Store

LEAD_CAPABILITY = "lead"


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

    def try_lead(self, highest_seen: int) -> Lease | None:
        """One round: wait rank × backoff, then claim if the lease is still vacant."""
        team, me = self.keeper.team, self.keeper.holder
        if self.store.current_lease(team) is not None:
            return None
        rank = rank_of(self.store.members(team), me)
        if rank:
            self.sleep(rank * self.backoff)
            if self.store.current_lease(team) is not None:
                return None
        try:
            return self.keeper.claim(at_least=highest_seen)
        except Conflict:
            return None
