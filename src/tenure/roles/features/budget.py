"""Budgets: a task or the whole team may spend only so much model work.

A task's budget (``budget:``) counts its attempts since the operator last answered
it (an answer is a person's decision to go on); the team's (the plan's
``budget:``, on every task's spec) counts everything, planning included. Running
out never overruns silently: dispatch and retry stop the task with a ``budget
exceeded: ...`` reason (``failed``, in the inbox, and a ``budget.exceeded`` event
this hook logs), and every envelope carries what is left, which the LLM worker
enforces between its calls; a worker that stops for its budget is not retried
either. What was spent is recorded by the leader for every team
(``roles.register.spend``); this hook only holds the limits.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ValidationError

from tenure.executors.llm_budget import BUDGET_PREFIX
from tenure.protocol import Budget, TaskResult, idempotency_key
from tenure.protocol.clip import clip
from tenure.protocol.taskspec import AttemptData
from tenure.protocol.words import counted
from tenure.roles.leader import GO, Admission, Dispatch, LeaderContext, LeaderHook, Stop
from tenure.roles.register import Task
from tenure.roles.register.spend import Totals, task_totals, team_seconds, team_totals

__all__ = ["EXCEEDED", "PREFIX", "BudgetHook", "exceeded", "remaining", "stop_reason"]

PREFIX = BUDGET_PREFIX
EXCEEDED = "budget.exceeded"


class BudgetHook(LeaderHook):
    """Stops a task that is out of budget; tells every attempt what it may spend."""

    stageable: ClassVar[bool] = True  # dispatch and result points: the store only

    name: ClassVar[str] = "budgets"

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        if not _limited(task):
            return GO
        stop = stop_reason(task, ctx.tasks(), ctx.now())
        if not stop:
            return GO
        exceeded(ctx, task, stop)
        return Stop(stop)

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        if _limited(dispatch.task):
            dispatch.budget = remaining(dispatch.task, ctx.tasks(), ctx.now())

    def before_retry(self, ctx: LeaderContext, task: Task, data: AttemptData) -> str | None:
        stop = worker_stopped(task)  # the worker itself ran out: no new attempt
        if stop is None and _limited(task):
            charged = Task(task.record, task.spec, data)  # this attempt's wall time counted
            stop = stop_reason(charged, ctx.tasks(), ctx.now())
        if stop:
            exceeded(ctx, task, stop)
        return stop


def exceeded(ctx: LeaderContext, task: Task, reason: str) -> None:
    """Log that ``task`` is stopped for its (or its team's) budget."""
    ctx.event(EXCEEDED, {"task_id": task.task_id, "reason": clip(reason, 500)})


def worker_stopped(task: Task) -> str | None:
    """The reason a worker gave for stopping the current attempt at its budget (the
    first line of a failed result that says ``budget exceeded``), or None."""
    if task.state != "review" or not task.result:
        return None
    try:
        result = TaskResult.model_validate(task.result)
    except ValidationError:
        return None  # not a result the ladder could have read either
    current = idempotency_key(task.task_id, task.attempt)
    if result.status != "failed" or result.idempotency_key != current:
        return None
    said = result.notes.uncertain[0] if result.notes.uncertain else ""
    return said.splitlines()[0] if said.startswith(PREFIX) else None


def _limited(task: Task) -> bool:
    return task.spec.budget is not None or task.spec.team_budget is not None


def _over(limits: Budget | None, totals: Totals, seconds: float, who: str) -> str | None:
    if limits is None:
        return None
    if limits.tokens is not None and totals.tokens >= limits.tokens:
        return f"{PREFIX}: {who} used {counted(totals.tokens, 'token')} of its {limits.tokens}"
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
