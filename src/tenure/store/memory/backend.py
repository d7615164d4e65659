"""The in-memory store: one process, no server, nothing kept after the process ends."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TypeGuard

from tenure.protocol.errors import Conflict, LeaseLost, NotFound
from tenure.store.memory.core import MemoryBase, positive
from tenure.store.memory.messages import MessagesMixin
from tenure.store.memory.register import RegisterMixin
from tenure.store.records import Lease, Member
from tenure.store.rules import (
    check_epoch,
    check_free,
    check_priority,
    check_proof,
    check_slots,
    check_token,
    next_epoch,
    same_lease,
    taken,
    token_hash,
    token_matches,
)


class MemoryStore(MessagesMixin, RegisterMixin, MemoryBase):
    """Atomic by one lock; the clock is ``time.time`` unless one is injected.

    ``MemoryStore(clock=ManualClock())`` lets a test move time by hand.
    ``MemoryStore(name="x")`` (or ``open_store("memory://x")``) is the same store
    every time in this process, until ``tenure.store.memory.forget("x")``. Other
    processes never see it: ``shared_across_processes`` is False.
    """

    # --- lease ------------------------------------------------------------------------

    def claim_lease(
        self, team: str, holder: str, ttl: float, *, token: str, at_least: int = 0
    ) -> Lease:
        positive("ttl", ttl)
        check_epoch("at_least", at_least)
        check_token(token)
        with self.memory.lock:
            now = self.now()
            held = self.memory.team(team).lease
            if held is not None and held.expires_at > now:
                raise Conflict(
                    f"team {team!r}: lease held by {held.holder!r} at epoch {held.epoch}"
                )
            return self._grant(team, holder, ttl, at_least, token, now, {})

    def seize_lease(
        self, team: str, holder: str, ttl: float, *, over: Lease, token: str, at_least: int = 0
    ) -> Lease:
        positive("ttl", ttl)
        check_epoch("at_least", at_least)
        check_token(token)
        with self.memory.lock:
            if not same_lease(self.memory.team(team).lease, over):
                raise Conflict(
                    f"team {team!r}: the lease is no longer {over.holder!r}'s at epoch {over.epoch}"
                )
            seized = {"over_holder": over.holder, "over_epoch": over.epoch}
            return self._grant(team, holder, ttl, at_least, token, self.now(), seized)

    def _grant(
        self,
        team: str,
        holder: str,
        ttl: float,
        at_least: int,
        token: str,
        now: float,
        extra: dict[str, Any],
    ) -> Lease:
        """A new lease at the next epoch, unproven (call with the lock held)."""
        state = self.memory.team(team)
        reported = [m.highest_epoch for m in state.members.values() if m.expires_at > now]
        epoch = next_epoch(team, state.epoch, at_least, reported)
        lease = Lease(team, holder, epoch, now + ttl, ttl, claimed_at=now)
        state.epoch, state.lease, state.token_hash = epoch, lease, token_hash(token)
        data = {"holder": holder, "ttl": ttl, **extra}
        self._event(team, "lease.claimed", data, epoch, at=now)
        return lease

    def prove_lease(self, team: str, holder: str, epoch: int, proof: str, *, token: str) -> Lease:
        check_epoch("epoch", epoch)
        check_proof(proof)
        with self.memory.lock:
            now = self.now()
            state = self.memory.team(team)
            held = self._held(team, holder, epoch, token, now)
            state.lease = replace(held, proof=proof)
            self._event(team, "lease.proved", {"holder": holder}, epoch, at=now)
            return state.lease

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float, *, token: str) -> Lease:
        check_epoch("epoch", epoch)
        positive("ttl", ttl)
        with self.memory.lock:
            now = self.now()
            held = self._held(team, holder, epoch, token, now)
            lease = replace(held, expires_at=now + ttl, ttl=ttl)
            self.memory.team(team).lease = lease
            return lease

    def _held(self, team: str, holder: str, epoch: int, token: str, now: float) -> Lease:
        """The live lease ``holder`` holds at ``epoch`` with ``token``, else ``LeaseLost``
        (lock held)."""
        state = self.memory.team(team)
        held = state.lease
        if (
            not _holds(held, holder, epoch)
            or held.expires_at <= now
            or not token_matches(state.token_hash, token)
        ):
            raise LeaseLost(f"team {team!r}: {holder!r} does not hold the lease at epoch {epoch}")
        return held

    def release_lease(self, team: str, holder: str, epoch: int, *, token: str) -> bool:
        check_epoch("epoch", epoch)
        with self.memory.lock:
            state = self.memory.team(team)
            if not _holds(state.lease, holder, epoch) or not token_matches(state.token_hash, token):
                return False
            state.lease, state.token_hash = None, None
            self._event(team, "lease.released", {"holder": holder}, epoch, at=self.now())
            return True

    def current_lease(self, team: str) -> Lease | None:
        with self.memory.lock:
            held = self.memory.team(team).lease
            return held if held is not None and held.expires_at > self.now() else None

    def current_epoch(self, team: str) -> int:
        with self.memory.lock:
            return self.memory.team(team).epoch

    # --- membership ---------------------------------------------------------------------

    def join(
        self,
        team: str,
        member_id: str,
        *,
        ttl: float,
        priority: int = 0,
        capabilities: Iterable[str] = (),
        highest_epoch: int = 0,
        incarnation: str = "",
        slots: int = 1,
        free_slots: int | None = None,
    ) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        positive("ttl", ttl)
        check_slots(slots)
        check_priority(priority)
        check_free(free_slots)
        free = slots if free_slots is None else min(free_slots, slots)
        caps = tuple(sorted(set(capabilities)))
        with self.memory.lock:
            now = self.now()
            members = self.memory.team(team).members
            known = members.get(member_id)
            if known is not None and known.expires_at > now:
                if known.incarnation != incarnation:
                    raise taken(team, member_id, now, known.beat_at, known.expires_at)
                highest_epoch = max(highest_epoch, known.highest_epoch)
            member = Member(
                team,
                member_id,
                priority,
                caps,
                highest_epoch,
                now,
                now + ttl,
                incarnation,
                now,
                slots,
                free,
            )
            members[member_id] = member
            data = {
                "member": member_id,
                "priority": priority,
                "capabilities": list(caps),
                "highest_epoch": highest_epoch,
                "slots": slots,
            }
            self._event(team, "member.joined", data, None, at=now)
            return member

    def heartbeat(
        self,
        team: str,
        member_id: str,
        *,
        ttl: float,
        highest_epoch: int = 0,
        incarnation: str = "",
        free_slots: int | None = None,
    ) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        positive("ttl", ttl)
        check_free(free_slots)
        with self.memory.lock:
            now = self.now()
            members = self.memory.team(team).members
            known = members.get(member_id)
            if known is None or known.expires_at <= now:
                raise NotFound(f"team {team!r}: {member_id!r} is not a live member; join again")
            if known.incarnation != incarnation:
                raise taken(team, member_id, now, known.beat_at, known.expires_at)
            seen = max(known.highest_epoch, highest_epoch)
            free = known.free_slots if free_slots is None else min(free_slots, known.slots)
            member = replace(
                known, highest_epoch=seen, expires_at=now + ttl, beat_at=now, free_slots=free
            )
            members[member_id] = member
            return member

    def leave(self, team: str, member_id: str) -> None:
        with self.memory.lock:
            if self.memory.team(team).members.pop(member_id, None) is not None:
                self._event(team, "member.left", {"member": member_id}, None, at=self.now())

    def members(self, team: str) -> list[Member]:
        with self.memory.lock:
            now = self.now()
            live = [m for m in self.memory.team(team).members.values() if m.expires_at > now]
        return sorted(live, key=lambda m: (-m.priority, m.member_id))


def _holds(lease: Lease | None, holder: str, epoch: int) -> TypeGuard[Lease]:
    return lease is not None and (lease.holder, lease.epoch) == (holder, epoch)
