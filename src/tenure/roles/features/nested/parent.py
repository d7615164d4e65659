"""The parent leader's side of nested teams: who leads a composite attempt, and
which upward reports count.

A composite task's attempt outlives its sub-leader. When the assignee goes
silent, idle sub-leader candidates of the parent stand in the child team's
election (``roles.teams.standby``) and the winner leads the child team for the
*same* parent attempt. The parent follows the child lease: a live parent member
holding it under an epoch claimed after the attempt began becomes the attempt's
assignee (a fenced change, same attempt). Only when nobody leads the child team
for a grace after the assignee went silent does the parent fall back to a new
attempt. A report made under a child epoch the child team has left is refused.
"""

from __future__ import annotations

from typing import ClassVar

from tenure.coord import LeaseProofs, LeaseTiming
from tenure.protocol import TaskResult
from tenure.protocol.errors import Conflict
from tenure.roles.leader import Dispatch, LeaderContext, LeaderHook, Watch
from tenure.roles.register import Task
from tenure.store import Lease, Member, Store

SILENT_GRACE_FACTOR = 4.0  # x the parent's stale grace (= its lease TTL for `tenure leader`)
CHILD_PROOF_GRACE = LeaseTiming().proof_grace  # a fresh child lease's time to be proved


def stale_report(store: Store, parent: str, task: Task, result: TaskResult) -> str | None:
    """Why a composite result must be refused: it was made under a child epoch that
    is no longer the child team's (a sub-leader that was superseded in its team)."""
    child = task.spec.child_team(parent)
    artifact = result.artifact
    if child is None or not isinstance(artifact, dict) or "team_epoch" not in artifact:
        return None
    try:
        reported = int(artifact["team_epoch"])
    except (TypeError, ValueError):
        return f"its team_epoch {artifact['team_epoch']!r} is not a number"
    current = store.current_epoch(child)
    if reported >= current:
        return None
    return f"reported under epoch {reported} of {child}, which is at epoch {current}"


def stood_in(task: Task) -> bool:
    """The assignee took the attempt over as a stand-in: it reports by itself, so a
    new parent leader must not send it the envelope (its follower would run it)."""
    return bool(task.assignee) and task.data.stand_in == task.assignee


class NestedTeamsHook(LeaderHook):
    """Follows the child lease of running composite tasks for the parent's leader.

    ``grace``: how long after the assignee went silent nobody may lead the child
    team before the parent retries the task as a new attempt."""

    name: ClassVar[str] = "nested-teams"
    stageable: ClassVar[bool] = True  # dispatch and result points: the store only

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._silent: dict[tuple[str, int], float] = {}  # attempt -> first seen silent
        self._proofs: dict[str, LeaseProofs | None] = {}  # child team -> its lease checker
        self._refused: set[tuple[str, int]] = set()  # child leases refused (said once)

    def on_takeover(self, ctx: LeaderContext, task: Task) -> bool:
        """A stand-in reports by itself; a composite attempt whose sub-leader is gone is
        followed by ``on_watch`` (its child team may elect a stand-in)."""
        if task.spec.team is None:
            return False
        if stood_in(task):
            return True
        return task.state == "running" and task.assignee not in ctx.workers()

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        """Remember the child epoch: only a child leader elected after it can take the
        new attempt over (an older one is still leaving)."""
        child = dispatch.task.spec.child_team(ctx.team)
        if child is None or not dispatch.new:
            return
        epoch = ctx.store.current_epoch(child)
        dispatch.data = dispatch.data.with_(stand_in=None, child_epoch=epoch)

    def on_result(self, ctx: LeaderContext, task: Task, result: TaskResult) -> str | None:
        if task.spec.team is None:
            return None
        return stale_report(ctx.store, ctx.team, task, result)

    def on_watch(self, ctx: LeaderContext, task: Task, now: float) -> Watch | None:
        """``moved`` to the member now leading the child team, ``waiting`` while a
        stand-in may still be elected, or None: supervise the task as any other."""
        child = task.spec.child_team(ctx.team)
        if child is None or task.state != "running" or not task.assignee:
            return None
        live = ctx.workers()
        lease = self._child_lease(ctx, child)
        key = (task.task_id, task.attempt)
        if (
            lease is not None
            and lease.holder != task.assignee
            and lease.holder in live
            and lease.epoch > (task.data.child_epoch or 0)
        ):
            self._silent.pop(key, None)
            return "moved" if self._move(ctx, task, child, lease.holder, lease.epoch) else "waiting"
        if task.assignee in live:
            self._silent.pop(key, None)
            return None
        return self._silence(ctx, task, child, key, now, live)

    def _child_lease(self, ctx: LeaderContext, child: str) -> Lease | None:
        """The child team's live lease, if it is to be followed: in a signed team only a
        lease the child's lead key proved (or a fresh one, inside the grace) leads it."""
        lease = ctx.store.current_lease(child)
        if lease is None or ctx.credentials is None:
            return lease
        if child not in self._proofs:
            self._proofs[child] = LeaseProofs.checker(ctx.credentials, child)
        proofs = self._proofs[child]
        reason = None if proofs is None else proofs.refused(ctx.store, lease, CHILD_PROOF_GRACE)
        if reason is None:
            return lease
        if (child, lease.epoch) not in self._refused:
            self._refused.add((child, lease.epoch))
            info = {"team": child, "claimed": lease.holder, "epoch": lease.epoch}
            ctx.event("security.lease_refused", {**info, "reason": reason})
        return None

    def _silence(
        self,
        ctx: LeaderContext,
        task: Task,
        child: str,
        key: tuple[str, int],
        now: float,
        live: dict[str, Member],
    ) -> Watch | None:
        if key not in self._silent:
            self._silent[key] = now
            ctx.event(
                "leader.sub_leader_silent",
                {
                    "task_id": task.task_id,
                    "attempt": task.attempt,
                    "assignee": task.assignee,
                    "team": child,
                    "grace": self.grace,
                },
            )
        if now - self._silent[key] < self.grace:
            return "waiting"
        del self._silent[key]
        return None  # nobody stood in: a new attempt, as for any silent worker

    def _move(self, ctx: LeaderContext, task: Task, child: str, holder: str, epoch: int) -> bool:
        data = task.data.with_(stand_in=holder, child_epoch=epoch)
        try:
            ctx.register.move(task, task.state, assignee=holder, data=data)
        except Conflict:
            return False  # changed meanwhile (a result came in): look again next round
        ctx.event(
            "leader.sub_leader_changed",
            {
                "task_id": task.task_id,
                "attempt": task.attempt,
                "from": task.assignee,
                "to": holder,
                "team": child,
                "child_epoch": epoch,
            },
        )
        return True
