"""Budgets: what each task and the whole team have spent, and whether they may spend more.

Spend lives in the register, so a new leader sees exactly what the old one saw:
each task keeps ``data["spend_log"]``, one entry per attempt (tokens, cost, calls
and wall seconds, from the result's ``usage`` and the leader's own clock), plus
entries for planner work done on its behalf (a split). The team's spend is the
sum over its tasks plus what planning the plan cost (``planning_spend``, copied
into every task's spec with the team's ``budget``).

A task's budget counts its attempts since the operator last answered it (an
answer is a person's decision to go on); the team's budget counts everything.
Running out never overruns silently: dispatch and retry stop the task with a
``budget exceeded: ...`` reason in the register, and every envelope carries
what is left, which the LLM worker enforces between its calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenure.protocol import Budget, Spend
from tenure.store import TaskRecord

PREFIX = "budget exceeded"


@dataclass
class Totals:
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    calls: int = 0
    unpriced: int = 0

    def add(self, entry: dict[str, Any]) -> None:
        self.tokens += int(entry.get("input_tokens", 0)) + int(entry.get("output_tokens", 0))
        self.cost_usd += float(entry.get("cost_usd", 0.0))
        self.seconds += float(entry.get("seconds", 0.0))
        self.calls += int(entry.get("calls", 0))
        self.unpriced += int(entry.get("unpriced", 0))

    def __str__(self) -> str:
        money = f"${self.cost_usd:.4f}" if self.cost_usd else "$0"
        return f"{self.tokens} tokens, {money}"


def log_attempt(
    data: dict[str, Any], attempt: int, usage: Spend | dict[str, Any] | None, seconds: float
) -> dict[str, Any]:
    """``data`` with this attempt's spend recorded (replacing an earlier entry for it)."""
    spent = usage.model_dump() if isinstance(usage, Spend) else dict(usage or {})
    entry = {
        "attempt": attempt,
        "input_tokens": int(spent.get("input_tokens", 0)),
        "output_tokens": int(spent.get("output_tokens", 0)),
        "cost_usd": float(spent.get("cost_usd", 0.0)),
        "calls": int(spent.get("calls", 0)),
        "unpriced": int(spent.get("unpriced", 0)),
        "seconds": round(max(0.0, seconds), 3),
    }
    if spent.get("model"):
        entry["model"] = spent["model"]
    log = [e for e in data.get("spend_log", []) if e.get("attempt") != attempt or e.get("kind")]
    return {**data, "spend_log": [*log, entry]}


def log_extra(data: dict[str, Any], kind: str, usage: Spend, attempt: int) -> dict[str, Any]:
    """``data`` with spend done for the task but outside an attempt (e.g. ``split``)."""
    entry = {**log_attempt({}, attempt, usage, 0.0)["spend_log"][0], "kind": kind}
    return {**data, "spend_log": [*data.get("spend_log", []), entry]}


def task_totals(task: TaskRecord, *, since_answer: bool = False) -> Totals:
    base = int(task.data.get("attempt_base", 0)) if since_answer else 0
    totals = Totals()
    for entry in task.data.get("spend_log", []):
        if int(entry.get("attempt", 0)) > base:
            totals.add(entry)
    return totals


def team_totals(tasks: list[TaskRecord]) -> Totals:
    totals = Totals()
    for task in tasks:
        for entry in task.data.get("spend_log", []):
            totals.add(entry)
    planning = next((t.spec["planning_spend"] for t in tasks if t.spec.get("planning_spend")), None)
    if planning:
        totals.add(planning)
    return totals


def team_seconds(tasks: list[TaskRecord], now: float) -> float:
    return now - min((t.created_at for t in tasks), default=now)


def _limits(raw: Any) -> Budget | None:
    return Budget.model_validate(raw) if raw else None


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


def stop_reason(task: TaskRecord, tasks: list[TaskRecord], now: float) -> str | None:
    """Why ``task`` may not start another attempt, or None if its budgets allow it."""
    own = _limits(task.spec.get("budget"))
    if own is not None:
        mine = task_totals(task, since_answer=True)
        reason = _over(own, mine, mine.seconds, f"task {task.task_id}")
        if reason:
            return reason
    team = _limits(task.spec.get("team_budget"))
    if team is None:
        return None
    return _over(team, team_totals(tasks), team_seconds(tasks, now), "the team")


def remaining(task: TaskRecord, tasks: list[TaskRecord], now: float) -> dict[str, Any] | None:
    """What the next attempt of ``task`` may spend (the tighter of task and team), or None."""
    own, team = _limits(task.spec.get("budget")), _limits(task.spec.get("team_budget"))
    if own is None and team is None:
        return None
    mine, all_ = task_totals(task, since_answer=True), team_totals(tasks)
    left: dict[str, Any] = {}
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


def with_wall(data: dict[str, Any], attempt: int, seconds: float) -> dict[str, Any]:
    """``data`` with the attempt's wall time logged, if it ran and nothing logged it yet
    (a worker that went silent or overran its deadline returns no usage)."""
    if "dispatched_at" not in data or attempt < 1:
        return data
    if any(e.get("attempt") == attempt and not e.get("kind") for e in data.get("spend_log", [])):
        return data
    return log_attempt(data, attempt, None, seconds)
