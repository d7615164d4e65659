"""Budgets: a task or the whole team may spend only so much model work.

A task's budget (``budget:``) counts its attempts since the operator last answered
it (an answer is a person's decision to go on); the team's (the plan's
``budget:``, on every task's spec) counts everything, planning included. Running
out never overruns silently: dispatch and retry stop the task with a ``budget
exceeded: ...`` reason (``failed``, in the inbox), and every envelope carries what
is left, which the LLM worker enforces between its calls. What was spent is
recorded by the leader for every team (``roles.register.spend``); this hook only
holds the limits.
"""

from __future__ import annotations

from typing import ClassVar

from tenure.executors.llm_budget import BUDGET_PREFIX
from tenure.protocol import Budget
from tenure.protocol.taskspec import AttemptData
from tenure.roles.leader import GO, Admission, Dispatch, LeaderContext, LeaderHook, Stop
from tenure.roles.register import Task
from tenure.roles.register.spend import Totals, task_totals, team_seconds, team_totals

__all__ = ["PREFIX", "BudgetHook", "remaining", "stop_reason"]

PREFIX = BUDGET_PREFIX


class BudgetHook(LeaderHook):
    """Stops a task that is out of budget; tells every attempt what it may spend."""

    name: ClassVar[str] = "budgets"

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        if not _limited(task):
            return GO
        stop = stop_reason(task, ctx.tasks(), ctx.now())
        return Stop(stop) if stop else GO

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        if _limited(dispatch.task):
            dispatch.budget = remaining(dispatch.task, ctx.tasks(), ctx.now())

    def before_retry(self, ctx: LeaderContext, task: Task, data: AttemptData) -> str | None:
        if not _limited(task):
            return None
        charged = Task(task.record, task.spec, data)  # this attempt's wall time counted
        return stop_reason(charged, ctx.tasks(), ctx.now())


def _limited(task: Task) -> bool:
    return task.spec.budget is not None or task.spec.team_budget is not None


def _over(limits: Budget | None, totals: Totals, seconds: float, who: str) -> str | None:
    if limits is None:
        return None
    if limits.tokens is not None and totals.tokens >= limits.tokens:
        return f"{PREFIX}: {who} used {totals.tokens} tokens of its {limits.tokens}"
    if limits.cost_usd is not None and totals.cost_usd >= limits.cost_usd:
        return f"{PREFIX}: {who} spent ${totals.cost_usd:.4f} of its ${limits.cost_usd:g}"
    if limits.wall_seconds is not None and seconds >= limits.wall_seconds:
        return f"{PREFIX}: {who} ran {seconds:.1f}s of its {limits.wall_seconds:g}s"
    return None


def stop_reason(task: Task, tasks: list[Task], now: float) -> str | None:
    """Why ``task`` may not start another attempt, or None if its budgets allow it."""
    own = task.spec.budget
    if own is not None:
        mine = task_totals(task, since_answer=True)
        reason = _over(own, mine, mine.seconds, f"task {task.task_id}")
        if reason:
            return reason
    team = task.spec.team_budget
    if team is None:
        return None
    return _over(team, team_totals(tasks), team_seconds(tasks, now), "the team")


def remaining(task: Task, tasks: list[Task], now: float) -> dict[str, float] | None:
    """What the next attempt of ``task`` may spend (the tighter of task and team), or None."""
    own, team = task.spec.budget, task.spec.team_budget
    if own is None and team is None:
        return None
    mine, all_ = task_totals(task, since_answer=True), team_totals(tasks)
    left: dict[str, float] = {}
    for limits, spent, seconds in (
        (own, mine, mine.seconds),
        (team, all_, team_seconds(tasks, now)),
    ):
        if limits is None:
            continue
        for name, value, used in (
            ("tokens", limits.tokens, spent.tokens),
            ("cost_usd", limits.cost_usd, spent.cost_usd),
            ("wall_seconds", limits.wall_seconds, seconds),
        ):
            if value is None:
                continue
            rest = max(0, value - used)
            rest = int(rest) if name == "tokens" else round(float(rest), 8)
            left[name] = rest if name not in left else min(left[name], rest)
    return left or None
