"""Standby: an idle sub-leader candidate replaces a silent sub-leader inside its team.

A composite task's attempt is held by one sub-leader of the parent team. When
that member stops heartbeating, its child lease runs out too (the child lease
TTL is the member TTL). Every idle ``--sub-leader`` member of the parent
watches for exactly that: a ``running`` composite task whose assignee is not a
live member and whose child lease is vacant. The candidates then stand in the
child team's election the way flat leaders do: ranked by priority, each waits
rank x backoff and claims only if the lease is still vacant; the store's
compare-and-set makes one winner per child epoch.

The winner leads the child team for the *same* parent attempt (adopting the
child register: done stays done, running children keep their worker), and
keeps the child lease until the parent has moved the attempt to it (so the
parent always sees who leads), then reports the roll-up upward as the
envelope of that attempt. It never runs the attempt through its follower,
so the silent member's effect ticket for the attempt's idempotency key never
stands in its way; the child register, not the ticket, is what makes a second
roll-up harmless. A stand-in never plans: for a goal-only nested team it adopts
the plan written by the sub-leader it replaces, and stands aside (the parent
retries after its grace) when there is none yet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tenure.coord import LeaseProofs, LeaseTiming
from tenure.protocol import Plan, TaskEnvelope, TaskResult, TenureError, to_dict
from tenure.protocol.plan import SUBTEAM_CAPABILITY
from tenure.protocol.taskspec import TaskSpec
from tenure.roles.features.nested import adopted
from tenure.roles.leader import Outcome
from tenure.roles.member import Follower, envelope_for
from tenure.roles.register import OPEN_STATES, RegisterView, Task
from tenure.store import Member


@dataclass(frozen=True)
class Attempt:
    """The parent attempt a child leader works for, and the assignees under which
    it may go on (itself; for a stand-in also the silent sub-leader it replaces)."""

    team: str
    task_id: str
    attempt: int
    holders: frozenset[str]


class ChildLeader(Protocol):
    """What a stand-in needs of the sub-leader's executor (``subleader.TeamExecutor``)."""

    def lead(
        self, plan: Plan, bound: Attempt, cancelled: threading.Event, *, stand_in: bool = False
    ) -> tuple[Outcome, int]: ...

    def handed_over(self, bound: Attempt, plan: Plan) -> Task | None: ...

    def report(self, env: TaskEnvelope, parent: str, team: str, epoch: int) -> TaskResult: ...


ChildPlan = Callable[[str, TaskSpec], Plan | None]

ELECTION_BACKOFF = 0.5  # rank x this before a claim, as for flat leader candidates


class Standby:
    def __init__(self, follower: Follower, executor: ChildLeader, child_plan: ChildPlan) -> None:
        self.follower = follower
        self.executor = executor
        self.child_plan = child_plan
        self.store = follower.store
        self.team = follower.team
        self.me = follower.me
        self.every = max(0.1, follower.config.member_ttl / 4)
        self.grace = LeaseTiming(ttl=follower.config.member_ttl).proof_grace  # the child's TTL
        self.backoff = ELECTION_BACKOFF
        self.view = RegisterView(self.store, self.team)
        self.reported: set[tuple[str, int]] = set()

    def run(self, stop: threading.Event) -> None:
        """Look for a silent sub-leader's child team while this member is idle."""
        while not stop.wait(self.every):
            if self.follower.busy:
                continue  # busy: idle candidates stand in
            try:
                self.once(stop)
            except TenureError as exc:
                self._event("subteam.standby_error", {"error": str(exc)})

    def once(self, stop: threading.Event) -> bool:
        """One look; True if this member stood in for a composite attempt."""
        tasks = self.view.tasks()
        orphans = [t for t in tasks if self._maybe_orphan(t)]
        if not orphans:
            return False
        live = {m.member_id: m for m in self.store.members(self.team)}
        for task in orphans:
            plan = self._plan(task)
            if task.assignee in live or self._led(plan.team):
                continue
            rank = self._rank(task, tasks, live)
            if rank is None:
                continue
            if rank and stop.wait(rank * self.backoff):
                return False
            if self._still_orphaned(task, plan.team):
                self.stand_in(task, plan, stop)
                return True
        return False

    def stand_in(self, task: Task, plan: Plan, stop: threading.Event) -> None:
        """Lead the child team for this attempt, then report once it is ours."""
        info = {"task_id": task.task_id, "attempt": task.attempt, "team": plan.team}
        if not plan.tasks:  # goal-only: adopt its plan, never plan it
            found = adopted(self.store, plan)
            if found is None:
                self.reported.add((task.task_id, task.attempt))  # nothing to lead: look no more
                self._event("subteam.stand_in_unplanned", info)
                return
            plan = found
        holders = frozenset({str(task.assignee), self.me})
        bound = Attempt(self.team, task.task_id, task.attempt, holders)
        self._event("subteam.standing_in", {**info, "for": task.assignee})
        _, epoch = self.executor.lead(plan, bound, stop, stand_in=True)
        record = self.executor.handed_over(bound, plan)
        if record is None:  # superseded, out-led, or stopped before the hand-over
            self._event("subteam.stand_in_stopped", info)
            return
        env = envelope_for(record, epoch=record.epoch, assignee=self.me)
        result = self.executor.report(env, self.team, plan.team, epoch)
        self.follower.mailbox.result(env.reply_to, to_dict(result))
        self.reported.add((task.task_id, task.attempt))
        self._event("subteam.reported", {**info, "status": result.status, "team_epoch": epoch})

    # --- helpers -------------------------------------------------------------------------

    def _maybe_orphan(self, task: Task) -> bool:
        return (
            task.state == "running"
            and bool(task.assignee)
            and task.assignee != self.me
            and task.spec.team is not None
            and (task.task_id, task.attempt) not in self.reported
        )

    def _plan(self, task: Task) -> Plan:
        plan = self.child_plan(self.team, task.spec)
        assert plan is not None  # _maybe_orphan saw its team section
        return plan

    def _rank(
        self, task: Task, tasks: list[Task], live: dict[str, Member]
    ) -> int | None:
        """This member's place among the idle candidates (None: not one of them)."""
        busy = {t.assignee for t in tasks if t.state in OPEN_STATES and t.assignee}
        candidates = sorted(
            (
                m
                for m in live.values()
                if SUBTEAM_CAPABILITY in m.capabilities
                and m.member_id != task.assignee
                and m.member_id not in busy
            ),
            key=lambda m: (-m.priority, m.member_id),
        )
        ids = [m.member_id for m in candidates]
        return ids.index(self.me) if self.me in ids else None

    def _still_orphaned(self, seen: Task, child: str) -> bool:
        """After the backoff: the same attempt, its assignee still silent, the lease vacant."""
        task = self.store.get_task(self.team, seen.task_id)  # the record: state fields only
        if (task.state, task.attempt, task.assignee) != ("running", seen.attempt, seen.assignee):
            return False
        live = {m.member_id for m in self.store.members(self.team)}
        return task.assignee not in live and not self._led(child)

    def _led(self, child: str) -> bool:
        """Someone leads the child team: its lease is live and, in a signed team, proved
        by the child's lead key (a forged one leads nobody; the stand-in seizes it)."""
        lease = self.store.current_lease(child)
        proofs = LeaseProofs.checker(self.follower.config.credentials, child)
        if lease is None or proofs is None:
            return lease is not None
        return proofs.respected(self.store, lease, self.grace) is not None

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        try:
            self.store.append_event(self.team, kind, {"member": self.me, **data})
        except TenureError:
            pass  # best effort while the store is away
