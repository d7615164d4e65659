"""The distributed store: Redis, shared by members on many machines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP
from tenure.protocol.errors import Conflict, LeaseLost, NotFound, StoreError
from tenure.store.records import Lease, Member
from tenure.store.redis.core import RedisBase, at, dumps, micros
from tenure.store.redis.messages import MessagesMixin
from tenure.store.redis.register import RegisterMixin
from tenure.store.redis.writes import WritesMixin
from tenure.store.rules import (
    check_epoch,
    check_free,
    check_priority,
    check_proof,
    check_slots,
    check_token,
    jump_refused,
    taken,
)


class RedisStore(MessagesMixin, RegisterMixin, WritesMixin, RedisBase):
    """Atomic by Lua scripts; the clock is the Redis server's (``TIME``)."""

    # --- lease ------------------------------------------------------------------------

    def claim_lease(
        self, team: str, holder: str, ttl: float, *, token: str, at_least: int = 0
    ) -> Lease:
        reply = self._grant("claim_lease", team, holder, ttl, at_least, token, {}, [])
        if reply[0] == "held":
            raise Conflict(f"team {team!r}: lease held by {reply[1]!r} at epoch {reply[2]}")
        return self._granted(team, holder, ttl, reply)

    def seize_lease(
        self, team: str, holder: str, ttl: float, *, over: Lease, token: str, at_least: int = 0
    ) -> Lease:
        seized = {"over_holder": over.holder, "over_epoch": over.epoch}
        refused = [over.holder, int(check_epoch("over.epoch", over.epoch)), over.proof or ""]
        reply = self._grant("seize_lease", team, holder, ttl, at_least, token, seized, refused)
        if reply[0] == "changed":
            raise Conflict(
                f"team {team!r}: the lease is no longer {over.holder!r}'s at epoch {over.epoch}"
            )
        return self._granted(team, holder, ttl, reply)

    def _grant(
        self,
        script: str,
        team: str,
        holder: str,
        ttl: float,
        at_least: int,
        token: str,
        extra: dict[str, Any],
        more: list[Any],
    ) -> list[Any]:
        ttl_us = micros("ttl", ttl)
        check_epoch("at_least", at_least)
        check_token(token)
        event = dumps({"holder": holder, "ttl": ttl, **extra})
        args = [holder, ttl_us, repr(float(ttl)), int(at_least), event, MAX_EPOCH_JUMP, MAX_EPOCH]
        reply = self._run(script, team, self._member_keys(team)[:2], [*args, token, *more])
        if reply[0] == "jump":
            raise jump_refused(team, int(reply[1]), at_least)
        if reply[0] == "exhausted":
            raise StoreError(f"team {team!r}: its epochs are used up (the limit is {MAX_EPOCH})")
        return reply

    def _granted(self, team: str, holder: str, ttl: float, reply: list[Any]) -> Lease:
        epoch, expires, claimed = int(reply[1]), at(reply[2]), at(reply[3])
        return Lease(team, holder, epoch, expires, float(ttl), claimed_at=claimed)

    def prove_lease(self, team: str, holder: str, epoch: int, proof: str, *, token: str) -> Lease:
        check_epoch("epoch", epoch)
        check_proof(proof)
        event = dumps({"holder": holder})
        args = [holder, int(epoch), proof, event, _presented(token)]
        reply = self._run("prove_lease", team, [], args)
        if reply[0] != "ok":
            raise LeaseLost(f"team {team!r}: {holder!r} does not hold the lease at epoch {epoch}")
        expires, ttl, claimed = at(reply[1]), float(reply[2]), at(reply[3])
        return Lease(team, holder, epoch, expires, ttl, claimed_at=claimed, proof=proof)

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float, *, token: str) -> Lease:
        check_epoch("epoch", epoch)
        ttl_us = micros("ttl", ttl)
        args = [holder, int(epoch), ttl_us, repr(float(ttl)), _presented(token)]
        reply = self._run("renew_lease", team, [], args)
        if reply[0] != "ok":
            raise LeaseLost(f"team {team!r}: {holder!r} does not hold the lease at epoch {epoch}")
        return Lease(team, holder, epoch, at(reply[1]), float(ttl), at(reply[2]), _proof(reply[3]))

    def release_lease(self, team: str, holder: str, epoch: int, *, token: str) -> bool:
        check_epoch("epoch", epoch)
        args = [holder, int(epoch), dumps({"holder": holder}), _presented(token)]
        reply = self._run("release_lease", team, [], args)
        return bool(reply[0] == "ok")

    def current_lease(self, team: str) -> Lease | None:
        reply = self._run("current_lease", team, [], [])
        if reply[0] != "ok":
            return None
        holder, epoch, expires, ttl = str(reply[1]), int(reply[2]), at(reply[3]), float(reply[4])
        return Lease(team, holder, epoch, expires, ttl, at(reply[5]), _proof(reply[6]))

    def current_epoch(self, team: str) -> int:
        with self._translated():
            value = self.client.hget(self.keys.team(team, "team"), "epoch")
        return int(value) if value is not None else 0

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
        ttl_us = micros("ttl", ttl)
        check_slots(slots)
        check_priority(priority)
        check_free(free_slots)
        free = slots if free_slots is None else min(free_slots, slots)
        caps = tuple(sorted(set(capabilities)))
        info = dumps({"priority": int(priority), "capabilities": list(caps), "slots": slots})
        event = {
            "member": member_id,
            "priority": priority,
            "capabilities": list(caps),
            "highest_epoch": highest_epoch,
            "slots": slots,
        }
        reply = self._run(
            "join",
            team,
            self._member_keys(team),
            [member_id, ttl_us, int(highest_epoch), info, dumps(event), incarnation, free],
        )
        self._taken(team, member_id, reply)
        now, high = int(reply[1]), int(reply[2])
        return Member(
            team,
            member_id,
            int(priority),
            caps,
            high,
            at(now),
            at(now + ttl_us),
            incarnation,
            at(now),
            slots,
            free,
        )

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
        ttl_us = micros("ttl", ttl)
        said = "" if check_free(free_slots) is None else str(free_slots)
        reply = self._run(
            "heartbeat",
            team,
            self._member_keys(team),
            [member_id, ttl_us, int(highest_epoch), incarnation, said],
        )
        self._taken(team, member_id, reply)
        if reply[0] != "ok":
            raise NotFound(f"team {team!r}: {member_id!r} is not a live member; join again")
        return _member(team, member_id, *reply[1:7])

    def _taken(self, team: str, member_id: str, reply: list[Any]) -> None:
        if reply[0] == "taken":
            now = self.now()
            raise taken(team, member_id, now, at(reply[1]), at(reply[2]))

    def leave(self, team: str, member_id: str) -> None:
        self._run("leave", team, self._member_keys(team), [member_id, dumps({"member": member_id})])

    def members(self, team: str) -> list[Member]:
        reply = self._run("members", team, self._member_keys(team), [])
        found = [_member(team, *reply[i : i + 7]) for i in range(1, len(reply), 7)]
        found.sort(key=lambda m: (-m.priority, m.member_id))
        return found

    def _member_keys(self, team: str) -> list[str]:
        return [
            self.keys.team(team, "m:exp"),
            self.keys.team(team, "m:high"),
            self.keys.team(team, "m:info"),
            self.keys.team(team, "m:inc"),
            self.keys.team(team, "m:beat"),
            self.keys.team(team, "m:free"),
        ]


def _member(
    team: str,
    member_id: Any,
    info: Any,
    highest: Any,
    expires: Any,
    inc: Any,
    beat: Any,
    free: Any = "",
) -> Member:
    details: dict[str, Any] = json.loads(info)
    slots = int(details.get("slots", 1))
    said = free.decode() if isinstance(free, bytes) else str(free)
    return Member(
        team,
        str(member_id),
        int(details.get("priority", 0)),
        tuple(details.get("capabilities", ())),
        int(highest),
        at(details.get("joined", 0)),
        at(expires),
        str(inc),
        at(beat),
        slots,
        min(int(said), slots) if said else slots,
    )


def _proof(value: Any) -> str | None:
    """A stored proof as the script returns it ('' when the lease has none)."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text or None


def _presented(token: Any) -> str:
    """A token as sent to a script: anything but a string is sent as '' (matches none)."""
    return token if isinstance(token, str) else ""
