"""Sub-leaders: a follower in a parent team that leads a nested team for one task.

A composite task (a plan task with a ``team:`` section) is dispatched in the
parent team like any other, to a member offering the ``subteam`` capability.
That member's executor, ``TeamExecutor``, runs a ``Leader`` for the nested
team: it claims the *child* lease (the child's own epoch space), loads the
nested plan from the parent's register, conducts it, and when the child plan
is finished returns one result upward whose artifact and evidence roll up the
children's (``roles.features.nested.rollup``).

A sub-leader that dies is replaced inside its own team, for the same parent
attempt: idle candidates of the parent stand in the child team's election
(``roles.teams.standby``) and the parent moves the attempt to the winner
(``roles.features.nested.parent``). Whoever leads the child team for an attempt stops
at once when the parent attempt is no longer one it may hold, and its report
names the child epoch it was made under, so a superseded sub-leader's report
is refused.

A ``team:`` section with a goal and no tasks is planned once by the sub-leader's
planner (``roles.features.nested.planning``); later leaders of the child team adopt that plan.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tenure.coord import Credentials, LeaseTiming
from tenure.executors import Executor, TaskContext, failed
from tenure.protocol import ConfigError, Plan, TaskEnvelope, TaskResult, TenureError
from tenure.protocol.plan import SUBTEAM_CAPABILITY
from tenure.protocol.taskspec import TaskSpec
from tenure.roles.features.nested import plan_once, rollup, unreported_spend
from tenure.roles.leader import LeaderConfig, Outcome
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.planning import Planner
from tenure.roles.register import Task, plan_settled, read_task
from tenure.roles.register.access import read_checked
from tenure.roles.teams.leader import Leader
from tenure.roles.teams.standby import Attempt, Standby
from tenure.store import Store
from tenure.verify import Trust

__all__ = ["SUBTEAM_CAPABILITY", "SubLeader", "TeamExecutor", "child_plan", "sub_leader"]


def child_plan(parent_team: str, spec: TaskSpec) -> Plan | None:
    """The nested team's plan for a composite task's spec, or None."""
    if spec.team is None:
        return None
    name = spec.child_team(parent_team)
    assert name is not None
    return spec.team.plan_for(name, spec.goal)


@dataclass
class TeamExecutor:
    """Runs composite tasks by leading their nested team; other tasks go to ``inner``."""

    store: Store
    inner: Executor
    member_id: str
    timing: LeaseTiming = field(default_factory=LeaseTiming)
    state_dir: Path | None = None
    workdir: Path | None = None
    poll_interval: float = 0.05
    stale_grace: float = 2.0
    trust: Trust | None = None
    watch_every: float = 0.2
    planner: Planner | None = None  # plans a goal-only nested team, once
    credentials: Credentials | None = None  # this member's in the parent team

    def child_credentials(self, team: str) -> Credentials | None:
        """The nested team's lead key, from the same key directory (None: unsigned)."""
        return None if self.credentials is None else self.credentials.for_team(team, "lead")

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        spec = read_task(self.store.get_task(ctx.team, envelope.task_id)).spec
        plan = child_plan(ctx.team, spec)
        if plan is None or spec.team is None:
            return self.inner.execute(envelope, ctx)
        if not plan.tasks:
            try:
                plan = plan_once(
                    self.store, self.member_id, self.planner, plan, spec.team, self.workdir
                )
            except TenureError as exc:
                ctx.record("subteam.planning_failed", {"team": plan.team, "reason": str(exc)})
                return self.unplanned(envelope, ctx.team, plan.team, str(exc))
        bound = Attempt(ctx.team, envelope.task_id, envelope.attempt, frozenset({self.member_id}))
        ctx.record("subteam.leading", {"task_id": envelope.task_id, "team": plan.team})
        outcome, epoch = self.lead(plan, bound, ctx.cancelled)
        if outcome != "settled" or self.superseded(bound):
            result = failed(envelope, f"stopped leading {plan.team}: the attempt was superseded")
            # the child epoch goes with it: a report from a superseded term is refused
            artifact = {"team": plan.team, "team_epoch": epoch}
            return result.model_copy(update={"artifact": artifact})
        return self.report(envelope, bound.team, plan.team, epoch)

    def lead(
        self, plan: Plan, bound: Attempt, cancelled: threading.Event, *, stand_in: bool = False
    ) -> tuple[Outcome, int]:
        """Lead the child team until its plan is finished or the attempt is not ours;
        returns the outcome and the child epoch of the last term."""
        stop = threading.Event()
        leader = Leader(
            self.store,
            LeaderConfig(
                team=plan.team,
                member_id=self.member_id,
                timing=self.timing,
                elect=False,  # chosen by the parent or by the stand-in election; fenced anyway
                exit_when_done=not stand_in,  # a stand-in keeps the lease until handed over
                state_dir=self.state_dir,
                workdir=self.workdir,
                poll_interval=self.poll_interval,
                stale_grace=self.stale_grace,
                trust=self.trust,
                credentials=self.child_credentials(plan.team),
            ),
            plan,
        )
        watcher = threading.Thread(
            target=self._watch,
            args=(bound, plan, stop, cancelled, stand_in),
            daemon=True,
            name=f"tenure-subteam-watch-{self.member_id}",
        )
        watcher.start()
        try:
            outcome = leader.lead(stop)
        finally:
            stop.set()
            watcher.join(timeout=5)
        return outcome, leader.memory.highest

    def report(self, env: TaskEnvelope, parent: str, team: str, epoch: int) -> TaskResult:
        """The roll-up; the parent's budgets count the nested spend once across attempts."""
        signed = self.child_credentials(team)  # a child record the team did not seal is no work
        children = [read_checked(self.store, r, signed) for r in self.store.tasks(team)]
        reported = read_task(self.store.get_task(parent, env.task_id)).data.spend_log
        spent = unreported_spend(self.store, team, children, reported)
        return rollup(env, team, children, spent, team_epoch=epoch)

    def unplanned(self, env: TaskEnvelope, parent: str, team: str, reason: str) -> TaskResult:
        """A failed attempt with the planner's reason, carrying what planning spent."""
        reported = read_task(self.store.get_task(parent, env.task_id)).data.spend_log
        spent = unreported_spend(self.store, team, [], reported)
        return failed(env, reason).model_copy(update={"usage": spent})

    def _watch(
        self,
        bound: Attempt,
        child: Plan,
        stop: threading.Event,
        cancelled: threading.Event,
        stand_in: bool,
    ) -> None:
        """Stop leading the child team once the parent attempt is no longer ours. A
        stand-in also stops when another member leads the child team, and when the
        child plan is settled and the parent has moved the attempt to it."""
        while not stop.wait(self.watch_every):
            if cancelled.is_set() or self.superseded(bound):
                break
            if stand_in and (self._other(child.team) or self.handed_over(bound, child) is not None):
                break
        stop.set()

    def handed_over(self, bound: Attempt, plan: Plan) -> Task | None:
        """The parent task, once it is this member's and the child plan is settled:
        until then a stand-in keeps the child lease, so the parent sees who leads."""
        try:
            task = self.store.get_task(bound.team, bound.task_id)
            if (task.state, task.attempt, task.assignee) != (
                "running",
                bound.attempt,
                self.member_id,
            ):
                return None
            children = [read_task(r) for r in self.store.tasks(plan.team)]
        except TenureError:
            return None
        if len(children) < len(plan.tasks) or not plan_settled(children):
            return None
        return read_task(task)

    def superseded(self, bound: Attempt) -> bool:
        try:
            task = self.store.get_task(bound.team, bound.task_id)
        except TenureError:
            return False  # the store is away: the child lease fences us meanwhile
        return (
            task.attempt != bound.attempt
            or task.assignee not in bound.holders
            or task.state not in ("queued", "running")
        )

    def _other(self, child: str) -> bool:
        try:
            lease = self.store.current_lease(child)
        except TenureError:
            return False
        return lease is not None and lease.holder != self.member_id


class SubLeader(Follower):
    """A follower that also stands by to lead the child teams of silent sub-leaders."""

    def __init__(self, store: Store, config: FollowerConfig, executor: TeamExecutor) -> None:
        super().__init__(store, config, executor)
        self.standby = Standby(self, executor, child_plan)

    def run(self, stop: threading.Event) -> None:
        thread = threading.Thread(
            target=self.standby.run, args=(stop,), daemon=True, name=f"tenure-standby-{self.me}"
        )
        thread.start()
        try:
            super().run(stop)
        finally:
            thread.join(timeout=10)


def sub_leader(
    store: Store,
    config: FollowerConfig,
    inner: Executor,
    *,
    timing: LeaseTiming | None = None,
    trust: Trust | None = None,
    planner: Planner | None = None,
) -> SubLeader:
    """A follower of ``config.team`` that leads the nested team of any composite task
    it is given (it offers the ``subteam`` capability), runs other tasks itself, and
    stands in for a silent sub-leader of the same team while idle. With a ``planner``
    it plans a goal-only nested team (once: later leaders adopt that plan). It has one
    slot: it leads one nested team at a time, and stands in only while idle."""
    if config.concurrency != 1:
        raise ConfigError(
            f"concurrency: a sub-leader runs one attempt at a time, got {config.concurrency}"
        )
    if SUBTEAM_CAPABILITY not in config.capabilities:
        config.capabilities = (*config.capabilities, SUBTEAM_CAPABILITY)
    executor = TeamExecutor(
        store,
        inner,
        config.member_id,
        timing=timing or LeaseTiming(),
        state_dir=config.state_dir,
        workdir=config.workdir,
        poll_interval=config.poll_interval,
        trust=trust,
        planner=planner,
        credentials=config.credentials,
    )
    return SubLeader(store, config, executor)
