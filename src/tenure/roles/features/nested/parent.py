"""The parent leader's side of nested teams: who leads a composite attempt, and
which upward reports count.

A composite task's attempt outlives its sub-leader. When the assignee goes
silent, idle sub-leader candidates of the parent stand in the child team's
election (``roles.subteam_standby``) and the winner leads the child team for
the *same* parent attempt. The parent follows the child lease: a live parent
member holding it under an epoch claimed after the attempt began becomes the
attempt's assignee (a fenced change, same attempt). Only when nobody leads the
child team for a grace after the assignee went silent does the parent fall
back to a new attempt.

This module imports only the store, so the conductor, the reviewer and the
console can all use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from tenure.protocol import TaskResult
from tenure.protocol.errors import Conflict
from tenure.store import Member, Store, TaskRecord

Step = Literal["moved", "waiting"]
SILENT_GRACE_FACTOR = 4.0  # x the parent's stale grace (= its lease TTL for `tenure leader`)


def child_team(parent: str, task_id: str, spec: dict[str, Any]) -> str | None:
    """The nested team's path of a composite task (``team.name`` or ``<parent>/<id>``)."""
    section = spec.get("team")
    if not isinstance(section, dict):
        return None
    return str(section.get("name") or f"{parent}/{task_id}")


def stale_report(store: Store, parent: str, task: TaskRecord, result: TaskResult) -> str | None:
    """Why a composite result must be refused: it was made under a child epoch that
    is no longer the child team's (a sub-leader that was superseded in its team)."""
    child = child_team(parent, task.task_id, task.spec)
    artifact = result.artifact
    if child is None or not isinstance(artifact, dict) or "team_epoch" not in artifact:
        return None
    reported, current = int(artifact["team_epoch"]), store.current_epoch(child)
    if reported >= current:
        return None
    return f"reported under epoch {reported} of {child}, which is at epoch {current}"


class SubLeaders:
    """Follows the child lease of running composite tasks for the parent's conductor."""

    def __init__(
        self,
        store: Store,
        team: str,
        epoch: Callable[[], int],
        event: Callable[[str, dict[str, Any]], None],
        grace: float,
    ) -> None:
        self.store = store
        self.team = team
        self.epoch = epoch
        self.event = event
        self.grace = grace
        self._silent: dict[tuple[str, int], float] = {}  # attempt -> first seen silent

    def follow(self, task: TaskRecord, live: dict[str, Member], now: float) -> Step | None:
        """``moved`` to the member now leading the child team, ``waiting`` while a
        stand-in may still be elected, or None: supervise the task as any other."""
        child = child_team(self.team, task.task_id, task.spec)
        if child is None or task.state != "running" or not task.assignee:
            return None
        lease = self.store.current_lease(child)
        key = (task.task_id, task.attempt)
        if (
            lease is not None
            and lease.holder != task.assignee
            and lease.holder in live
            and lease.epoch > int(task.data.get("child_epoch", 0))
        ):
            self._silent.pop(key, None)
            return "moved" if self._move(task, child, lease.holder, lease.epoch) else "waiting"
        if task.assignee in live:
            self._silent.pop(key, None)
            return None
        if key not in self._silent:
            self._silent[key] = now
            self.event(
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

    def _move(self, task: TaskRecord, child: str, holder: str, child_epoch: int) -> bool:
        data = {**task.data, "stand_in": holder, "child_epoch": child_epoch}
        try:
            self.store.transition(
                self.team,
                task.task_id,
                epoch=self.epoch(),
                expect=[task.state],
                to=task.state,
                version=task.version,
                assignee=holder,
                data=data,
            )
        except Conflict:
            return False  # changed meanwhile (a result came in): look again next round
        self.event(
            "leader.sub_leader_changed",
            {
                "task_id": task.task_id,
                "attempt": task.attempt,
                "from": task.assignee,
                "to": holder,
                "team": child,
                "child_epoch": child_epoch,
            },
        )
        return True


def dispatch_data(store: Store, team: str, task: TaskRecord, data: dict[str, Any]) -> None:
    """At dispatch, remember the child epoch: only a child leader elected after it
    can take the new attempt over (an older one is still leaving)."""
    child = child_team(team, task.task_id, task.spec)
    data.pop("stand_in", None)
    if child is not None:
        data["child_epoch"] = store.current_epoch(child)


def stood_in(task: TaskRecord) -> bool:
    """The assignee took the attempt over as a stand-in: it reports by itself, so a
    new parent leader must not send it the envelope (its follower would run it)."""
    return bool(task.assignee) and task.data.get("stand_in") == task.assignee
