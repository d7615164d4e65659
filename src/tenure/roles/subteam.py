"""Sub-leaders: a follower in a parent team that leads a nested team for one task.

A composite task (a plan task with a ``team:`` section) is dispatched in the
parent team like any other, to a member offering the ``subteam`` capability.
That member's executor, ``TeamExecutor``, runs a ``Leader`` for the nested
team: it claims the *child* lease (the child's own epoch space), loads the
nested plan from the parent's register, conducts it, and when the child plan
is finished returns one result upward whose artifact and evidence roll up the
children's.

Failover falls out of the machinery already there. If the sub-leader dies, the
parent retries the composite task on another candidate, whose child leader
claims the child lease at a higher child epoch and adopts the child register:
no child task is lost or run again. The upward report goes through the
follower path, fenced by the parent epoch of the envelope, and is refused by
the parent unless it answers the current attempt; a sub-leader that finds its
attempt superseded stops leading the child team at once.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenure.coord import LeaseTiming
from tenure.executors import Executor, TaskContext, failed, make_result
from tenure.protocol import Plan, TaskEnvelope, TaskResult, TenureError
from tenure.protocol.envelope import Spend
from tenure.protocol.plan import SUBTEAM_CAPABILITY, SubTeam
from tenure.roles.follower import Follower, FollowerConfig
from tenure.roles.leader import Leader, LeaderConfig
from tenure.store import Store, TaskRecord
from tenure.verify import Trust

__all__ = ["SUBTEAM_CAPABILITY", "TeamExecutor", "child_plan", "rollup", "sub_leader"]


def child_plan(parent_team: str, task_id: str, spec: dict[str, Any]) -> Plan | None:
    """The nested team's plan for a composite task's register spec, or None."""
    section = spec.get("team")
    if not section:
        return None
    sub = SubTeam.model_validate(section)
    return Plan(
        team=sub.name or f"{parent_team}/{task_id}",
        goal=sub.goal or str(spec.get("goal", "")),
        max_attempts=sub.max_attempts,
        tasks=sub.tasks,
        policies=sub.policies,
        budget=sub.budget,
    )


def nested_spend(tasks: list[TaskRecord], reported: list[dict[str, Any]]) -> Spend | None:
    """The nested team's model spend not yet reported upward by an earlier attempt."""
    keys = ("input_tokens", "output_tokens", "cost_usd", "calls", "unpriced")
    total = dict.fromkeys(keys, 0.0)
    for task in tasks:
        for entry in task.data.get("spend_log", []):
            for key in keys:
                total[key] += float(entry.get(key, 0))
    for entry in reported:
        for key in keys:
            total[key] -= float(entry.get(key, 0))
    if not any(total[key] > 0 for key in keys):
        return None
    return Spend(
        input_tokens=max(0, int(total["input_tokens"])),
        output_tokens=max(0, int(total["output_tokens"])),
        cost_usd=max(0.0, total["cost_usd"]),
        calls=max(0, int(total["calls"])),
        unpriced=max(0, int(total["unpriced"])),
    )


def rollup(
    env: TaskEnvelope, team: str, tasks: list[TaskRecord], usage: Spend | None = None
) -> TaskResult:
    """One result for the composite task: the children's states, artifacts and evidence."""
    children: dict[str, Any] = {}
    evidence: list[Any] = []
    for task in sorted(tasks, key=lambda t: t.task_id):
        result = task.result or {}
        children[task.task_id] = {
            "state": task.state,
            "attempt": task.attempt,
            "assignee": task.assignee,
            "artifact": result.get("artifact"),
        }
        if task.state == "done":
            evidence.extend(result.get("evidence", []))
    states = Counter(t.state for t in tasks)
    artifact = {"team": team, "states": dict(sorted(states.items())), "tasks": children}
    waiting = sorted(t.task_id for t in tasks if t.state != "done")
    if waiting:
        reason = f"nested team {team}: not done: {', '.join(waiting)}"
        return make_result(
            env,
            "failed",
            artifact=artifact,
            evidence=evidence,
            notes={"uncertain": [reason]},
            usage=usage,
        )
    return make_result(env, "completed", artifact=artifact, evidence=evidence, usage=usage)


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

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        spec = self.store.get_task(ctx.team, envelope.task_id).spec
        plan = child_plan(ctx.team, envelope.task_id, spec)
        if plan is None:
            return self.inner.execute(envelope, ctx)
        stop = threading.Event()
        watcher = threading.Thread(
            target=self._watch,
            args=(ctx, envelope, stop),
            daemon=True,
            name=f"tenure-subteam-watch-{self.member_id}",
        )
        leader = Leader(
            self.store,
            LeaderConfig(
                team=plan.team,
                member_id=self.member_id,
                timing=self.timing,
                elect=False,  # the parent chose this member; the child lease still fences it
                state_dir=self.state_dir,
                workdir=self.workdir,
                poll_interval=self.poll_interval,
                stale_grace=self.stale_grace,
                trust=self.trust,
            ),
            plan,
        )
        ctx.record("subteam.leading", {"task_id": envelope.task_id, "team": plan.team})
        watcher.start()
        try:
            outcome = leader.run(stop)
        finally:
            stop.set()
            watcher.join(timeout=5)
        if outcome != "finished" or self._superseded(ctx, envelope):
            return failed(envelope, f"stopped leading {plan.team}: the attempt was superseded")
        # the parent's budgets count the nested team's spend, once across attempts
        children = self.store.tasks(plan.team)
        reported = self.store.get_task(ctx.team, envelope.task_id).data.get("spend_log", [])
        return rollup(envelope, plan.team, children, nested_spend(children, reported))

    def _watch(self, ctx: TaskContext, env: TaskEnvelope, stop: threading.Event) -> None:
        """Stop leading the child team once the parent attempt is no longer ours."""
        while not stop.wait(self.watch_every):
            if ctx.cancelled.is_set() or self._superseded(ctx, env):
                stop.set()
                return

    def _superseded(self, ctx: TaskContext, env: TaskEnvelope) -> bool:
        try:
            task = self.store.get_task(ctx.team, env.task_id)
        except TenureError:
            return False  # the store is away: the child lease fences us meanwhile
        return (
            task.attempt != env.attempt
            or task.assignee != self.member_id
            or task.state not in ("queued", "running")
        )


def sub_leader(
    store: Store,
    config: FollowerConfig,
    inner: Executor,
    *,
    timing: LeaseTiming | None = None,
    trust: Trust | None = None,
) -> Follower:
    """A follower of ``config.team`` that leads the nested team of any composite task
    it is given (it offers the ``subteam`` capability) and runs other tasks itself."""
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
    )
    return Follower(store, config, executor)
