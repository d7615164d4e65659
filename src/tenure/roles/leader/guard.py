"""What a signed leader refuses to act on: register records the team did not write,
and members the team has no key for.

A record whose seal the leader refuses (``Task.tamper``) is never acted on. Once per
record version the leader says so (``security.register_refused``, naming the task and
the claimed signer) and puts it right where the state machine allows: an open or
waiting task (``queued``, ``running``, ``review``, ``blocked``, ``failed``) goes back
to ``queued`` as a new attempt, its attempt data, result and reason not trusted and
dropped (the event lists what was); a finished one (``done``, ``cancelled``) cannot
be written again, so it is set aside: marked in the ledger
(``roles.register.tampered``), its dependents never start on it, and the plan waits
for a person.

A member the team has no public key for could not sign a result: it is given no work
(``security.member_refused``, once per incarnation).
"""

from __future__ import annotations

from collections.abc import Mapping

from tenure.protocol import TenureError
from tenure.protocol.errors import ConfigError, Conflict, LeaseLost, ProtocolError, StaleEpoch
from tenure.protocol.taskspec import SEAL_FIELD, AttemptData
from tenure.roles.leader.hooks import LeaderContext
from tenure.roles.register import TAMPERED, Task
from tenure.roles.register.seal import FINAL_STATES
from tenure.roles.register.tampered import mark
from tenure.store import Member

__all__ = ["Guard"]

REQUEUED = "queued again as a new attempt"
SET_ASIDE = "set aside: nothing starts on it; a person decides (tenure inbox)"


class Guard:
    """One leader's memory of what it refused already (once per record version, once
    per member incarnation)."""

    def __init__(self) -> None:
        self._records: set[tuple[str, int, float]] = set()
        self._members: set[tuple[str, str]] = set()

    def put_right(self, ctx: LeaderContext, task: Task) -> bool:
        """Handle a task whose last write the team did not seal; True if it moved."""
        assert task.tamper is not None
        seen = (task.task_id, task.version, task.created_at)
        if seen in self._records:
            return False
        info: dict[str, object] = {
            "task_id": task.task_id,
            "version": task.version,
            "state": task.state,
            "claimed": task.tamper.claimed,
            "reason": task.tamper.reason,
        }
        if task.state in FINAL_STATES:
            self._records.add(seen)
            try:
                marked = mark(ctx.store, ctx.team, task, epoch=ctx.epoch(), holder=ctx.me)
            except (LeaseLost, StaleEpoch):
                raise
            except TenureError as exc:  # set aside all the same; said without the mark
                ctx.event("security.register_refused", {**info, "action": f"{SET_ASIDE} ({exc})"})
                return False
            if marked:
                ctx.event("security.register_refused", {**info, "action": SET_ASIDE})
            return False
        discarded = sorted(k for k in task.record.data if k != SEAL_FIELD)
        if task.result is not None:
            discarded.append("result")
        try:
            ctx.register.move(
                task,
                "queued",
                assignee=None,
                result=None,
                data=AttemptData(attempt_base=task.attempt),
                reason=f"{TAMPERED}; {REQUEUED}",
            )
        except Conflict:
            return False  # changed again meanwhile: the next round reads it anew
        except (LeaseLost, StaleEpoch):
            raise
        except TenureError as exc:  # a record the store will not take back: left as it is
            self._records.add(seen)
            ctx.event("security.register_refused", {**info, "action": f"left as it is: {exc}"})
            return False
        self._records.add(seen)
        ctx.event("security.register_refused", {**info, "action": REQUEUED, "discarded": discarded})
        return True

    def keyed(self, ctx: LeaderContext, members: Mapping[str, Member]) -> dict[str, Member]:
        """``members`` the team has a public key for (all of them when unsigned)."""
        credentials = ctx.credentials
        if credentials is None:
            return dict(members)
        kept = {}
        for member_id, member in members.items():
            try:
                known = credentials.keys.member(member_id) is not None
            except (ProtocolError, ConfigError):
                known = False  # not even a member id, or a key file that is no key
            if known:
                kept[member_id] = member
            elif (member_id, member.incarnation) not in self._members:
                self._members.add((member_id, member.incarnation))
                reason = "the team has no public key for it: it is given no work"
                ctx.event(
                    "security.member_refused",
                    {"member": member_id, "incarnation": member.incarnation, "reason": reason},
                )
        return kept
