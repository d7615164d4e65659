"""What each task and the whole team have spent, as the register records it.

Spend lives in the register, so a new leader sees exactly what the old one saw:
each task keeps ``data.spend_log``, one entry per attempt (tokens, cost, calls
and wall seconds, from the result's ``usage`` and the leader's own clock), plus
entries for work done on its behalf outside an attempt (``kind``: a split, a
judge). The team's spend is the sum over its tasks plus what planning the plan
cost (``planning_spend``, on every task's spec). Limits on it are a leader
feature (``roles.features.budget``); recording it is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenure.protocol import Spend
from tenure.protocol.taskspec import AttemptData, SpendEntry
from tenure.roles.register.task import Task

__all__ = [
    "Totals",
    "log_attempt",
    "log_extra",
    "task_totals",
    "team_seconds",
    "team_totals",
    "with_wall",
]


@dataclass
class Totals:
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    calls: int = 0
    unpriced: int = 0

    def add(self, entry: SpendEntry | Spend) -> None:
        self.tokens += entry.input_tokens + entry.output_tokens
        self.cost_usd += entry.cost_usd
        self.seconds += entry.seconds if isinstance(entry, SpendEntry) else 0.0
        self.calls += entry.calls
        self.unpriced += entry.unpriced

    def __str__(self) -> str:
        money = f"${self.cost_usd:.4f}" if self.cost_usd else "$0"
        return f"{self.tokens} tokens, {money}"


def _entry(attempt: int, usage: Spend | None, seconds: float, kind: str | None) -> SpendEntry:
    spent = usage or Spend()
    return SpendEntry(
        attempt=attempt,
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        cost_usd=spent.cost_usd,
        calls=spent.calls,
        unpriced=spent.unpriced,
        seconds=round(max(0.0, seconds), 3),
        model=spent.model,
        kind=kind,
    )


def log_attempt(data: AttemptData, attempt: int, usage: Spend | None, seconds: float) -> AttemptData:
    """``data`` with this attempt's spend recorded (replacing an earlier entry for it)."""
    kept = [e for e in data.spend_log if e.attempt != attempt or e.kind]
    return data.with_(spend_log=[*kept, _entry(attempt, usage, seconds, None)])


def log_extra(data: AttemptData, kind: str, usage: Spend, attempt: int) -> AttemptData:
    """``data`` with spend done for the task outside an attempt (``split``, ``judge``)."""
    return data.with_(spend_log=[*data.spend_log, _entry(attempt, usage, 0.0, kind)])


def with_wall(data: AttemptData, attempt: int, seconds: float) -> AttemptData:
    """``data`` with the attempt's wall time logged, if it ran and nothing logged it yet
    (a worker that went silent or overran its deadline returns no usage)."""
    if data.dispatched_at is None or attempt < 1:
        return data
    if any(e.attempt == attempt and not e.kind for e in data.spend_log):
        return data
    return log_attempt(data, attempt, None, seconds)


def task_totals(task: Task, *, since_answer: bool = False) -> Totals:
    base = task.data.attempt_base if since_answer else 0
    totals = Totals()
    for entry in task.data.spend_log:
        if entry.attempt > base:
            totals.add(entry)
    return totals


def team_totals(tasks: list[Task]) -> Totals:
    totals = Totals()
    for task in tasks:
        for entry in task.data.spend_log:
            totals.add(entry)
    planning = next((t.spec.planning_spend for t in tasks if t.spec.planning_spend), None)
    if planning is not None:
        totals.add(planning)
    return totals


def team_seconds(tasks: list[Task], now: float) -> float:
    return now - min((t.created_at for t in tasks), default=now)
