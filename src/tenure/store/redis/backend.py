"""The distributed store: Redis, shared by members on many machines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP
from tenure.protocol.errors import Conflict, LeaseLost, NotFound, StoreError
from tenure.store.base import check_epoch
from tenure.store.records import Lease, Member
from tenure.store.redis.core import RedisBase, at, dumps, micros
from tenure.store.redis.messages import MessagesMixin
from tenure.store.redis.register import RegisterMixin


class RedisStore(MessagesMixin, RegisterMixin, RedisBase):
    """Atomic by Lua scripts; the clock is the Redis server's (``TIME``)."""

    # --- lease ------------------------------------------------------------------------

    def claim_lease(self, team: str, holder: str, ttl: float, *, at_least: int = 0) -> Lease:
        ttl_us = micros("ttl", ttl)
        check_epoch("at_least", at_least)
        reply = self._run(
            "claim_lease",
            team,
            self._member_keys(team)[:2],
            [
                holder,
                ttl_us,
                repr(float(ttl)),
                int(at_least),
                dumps({"holder": holder, "ttl": ttl}),
                MAX_EPOCH_JUMP,
                MAX_EPOCH,
            ],
        )
        if reply[0] == "held":
            raise Conflict(f"team {team!r}: lease held by {reply[1]!r} at epoch {reply[2]}")
        if reply[0] == "exhausted":
            raise StoreError(f"team {team!r}: its epochs are used up (the limit is {MAX_EPOCH})")
        return Lease(team, holder, int(reply[1]), at(reply[2]), float(ttl))

    def renew_lease(self, team: str, holder: str, epoch: int, ttl: float) -> Lease:
        check_epoch("epoch", epoch)
        ttl_us = micros("ttl", ttl)
        reply = self._run("renew_lease", team, [], [holder, int(epoch), ttl_us, repr(float(ttl))])
        if reply[0] != "ok":
            raise LeaseLost(f"team {team!r}: {holder!r} does not hold the lease at epoch {epoch}")
        return Lease(team, holder, epoch, at(reply[1]), float(ttl))

    def release_lease(self, team: str, holder: str, epoch: int) -> bool:
        check_epoch("epoch", epoch)
        reply = self._run(
            "release_lease", team, [], [holder, int(epoch), dumps({"holder": holder})]
        )
        return bool(reply[0] == "ok")

    def current_lease(self, team: str) -> Lease | None:
        reply = self._run("current_lease", team, [], [])
        if reply[0] != "ok":
            return None
        return Lease(team, str(reply[1]), int(reply[2]), at(reply[3]), float(reply[4]))

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
    ) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        ttl_us = micros("ttl", ttl)
        caps = tuple(sorted(set(capabilities)))
        info = dumps({"priority": int(priority), "capabilities": list(caps)})
        event = {
            "member": member_id,
            "priority": priority,
            "capabilities": list(caps),
            "highest_epoch": highest_epoch,
        }
        reply = self._run(
            "join",
            team,
            self._member_keys(team),
            [member_id, ttl_us, int(highest_epoch), info, dumps(event)],
        )
        now, high = int(reply[1]), int(reply[2])
        return Member(team, member_id, int(priority), caps, high, at(now), at(now + ttl_us))

    def heartbeat(self, team: str, member_id: str, *, ttl: float, highest_epoch: int = 0) -> Member:
        check_epoch("highest_epoch", highest_epoch)
        ttl_us = micros("ttl", ttl)
        reply = self._run(
            "heartbeat", team, self._member_keys(team), [member_id, ttl_us, int(highest_epoch)]
        )
        if reply[0] != "ok":
            raise NotFound(f"team {team!r}: {member_id!r} is not a live member; join again")
        return _member(team, member_id, reply[1], reply[2], reply[3])

    def leave(self, team: str, member_id: str) -> None:
        self._run("leave", team, self._member_keys(team), [member_id, dumps({"member": member_id})])

    def members(self, team: str) -> list[Member]:
        reply = self._run("members", team, self._member_keys(team), [])
        found = [
            _member(team, reply[i], reply[i + 1], reply[i + 2], reply[i + 3])
            for i in range(1, len(reply), 4)
        ]
        found.sort(key=lambda m: (-m.priority, m.member_id))
        return found

    def _member_keys(self, team: str) -> list[str]:
        return [
            self.keys.team(team, "m:exp"),
            self.keys.team(team, "m:high"),
            self.keys.team(team, "m:info"),
        ]


def _member(team: str, member_id: Any, info: Any, highest: Any, expires: Any) -> Member:
    details: dict[str, Any] = json.loads(info)
    return Member(
        team,
        str(member_id),
        int(details.get("priority", 0)),
        tuple(details.get("capabilities", ())),
        int(highest),
        at(details.get("joined", 0)),
        at(expires),
    )
