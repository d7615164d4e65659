"""What each task and the whole team have spent, as the register records it.

Spend lives in the register, so a new leader sees exactly what the old one saw:
each task keeps ``data.spend_log``, one entry per attempt (tokens, cost, calls
and wall seconds, from the result's ``usage`` and the leader's own clock), plus
entries for work done on its behalf outside an attempt (``kind``: a split, a
judge). The team's spend is the sum over its tasks plus what planning the plan
cost (``planning_spend``, on every task's spec). Limits on it are a leader
feature (``roles.features.budget``); recording it is not.

An attempt the leader gives up on before its result comes (a deadline, a worker
that went silent) is charged all the same: its wall time, and the ``model.call``
events its worker logged since it was dispatched (``logged_calls``). The entry is
``awaiting`` until that worker reports; its late result then replaces the sum
(``charge_late``), whichever counts more, and until then the worker counts as
still busy with it (``stuck_workers``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tenure.protocol import Spend
from tenure.protocol.taskspec import AttemptData, SpendEntry
from tenure.protocol.words import counted
from tenure.roles.register.task import Task
from tenure.store import Store

__all__ = [
    "CALL_EVENT",
    "Totals",
    "awaiting_entry",
    "charge_late",
    "last_worker",
    "log_attempt",
    "log_extra",
    "logged",
    "logged_calls",
    "stuck_workers",
    "task_totals",
    "team_seconds",
    "team_totals",
    "with_wall",
]

CALL_EVENT = "model.call"  # what an LLM worker logs for each call it makes
PAGE = 1000


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
        return f"{counted(self.tokens, 'token')}, {money}"


def _entry(
    attempt: int,
    usage: Spend | None,
    seconds: float,
    kind: str | None,
    member: str | None = None,
    *,
    abandoned: bool = False,
) -> SpendEntry:
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
        member=member,
        abandoned=abandoned,
        awaiting=abandoned,
    )


def log_attempt(
    data: AttemptData,
    attempt: int,
    usage: Spend | None,
    seconds: float,
    member: str | None = None,
) -> AttemptData:
    """``data`` with this attempt's spend recorded (replacing an earlier entry for it)."""
    kept = [e for e in data.spend_log if e.attempt != attempt or e.kind]
    return data.with_(spend_log=[*kept, _entry(attempt, usage, seconds, None, member)])


def log_extra(data: AttemptData, kind: str, usage: Spend, attempt: int) -> AttemptData:
    """``data`` with spend done for the task outside an attempt (``split``, ``judge``)."""
    return data.with_(spend_log=[*data.spend_log, _entry(attempt, usage, 0.0, kind)])


def logged(data: AttemptData, attempt: int) -> bool:
    """True if the attempt's own spend is logged already (its result came, or it was
    given up on before)."""
    return any(e.attempt == attempt and not e.kind for e in data.spend_log)


def with_wall(
    data: AttemptData,
    attempt: int,
    seconds: float,
    *,
    member: str | None = None,
    spent: Spend | None = None,
) -> AttemptData:
    """``data`` with an attempt the leader gives up on charged, if it ran and nothing
    logged it yet (a worker that went silent or overran its deadline has returned no
    usage): its wall time and ``spent``, what its worker logged (``logged_calls``),
    ``awaiting`` the worker's own report."""
    if data.dispatched_at is None or attempt < 1 or logged(data, attempt):
        return data
    kept = [e for e in data.spend_log if e.attempt != attempt or e.kind]
    entry = _entry(attempt, spent, seconds, None, member, abandoned=True)
    return data.with_(spend_log=[*kept, entry])


def awaiting_entry(data: AttemptData, attempt: int) -> SpendEntry | None:
    """The entry of an attempt given up on whose worker has not reported yet."""
    return next(
        (e for e in data.spend_log if e.attempt == attempt and not e.kind and e.awaiting), None
    )


def charge_late(data: AttemptData, attempt: int, usage: Spend | None) -> AttemptData:
    """``data`` with the late result of a given-up attempt charged: its reported usage
    replaces the sum from the event log when it counts more (a call left behind may be
    in one and not the other); the wall time stays the leader's."""
    entry = awaiting_entry(data, attempt)
    if entry is None:
        return data
    reported = usage or Spend()
    update: dict[str, object] = {"awaiting": False}
    if (reported.input_tokens + reported.output_tokens, reported.cost_usd) >= (
        entry.tokens,
        entry.cost_usd,
    ):
        update.update(
            input_tokens=reported.input_tokens,
            output_tokens=reported.output_tokens,
            cost_usd=reported.cost_usd,
            calls=reported.calls,
            unpriced=reported.unpriced,
            model=reported.model or entry.model,
        )
    log = [entry.model_copy(update=update) if e is entry else e for e in data.spend_log]
    return data.with_(spend_log=log)


def logged_calls(
    store: Store, team: str, task_id: str, attempt: int, *, member: str | None, after: int
) -> Spend | None:
    """What the ``model.call`` events of this attempt (by ``member``, when known) logged
    since event ``after``: the worker's own meter, summed. None when it logged none."""
    tokens_in = tokens_out = calls = unpriced = 0
    cost = 0.0
    model: str | None = None
    while True:
        events = store.events(team, after=after, limit=PAGE)
        for event in events:
            data = event.data
            if (
                event.kind != CALL_EVENT
                or data.get("task_id") != task_id
                or data.get("attempt") != attempt
                or (member is not None and data.get("member") != member)
            ):
                continue
            tokens_in += _count(data.get("input_tokens"))
            tokens_out += _count(data.get("output_tokens"))
            cost += max(0.0, _number(data.get("cost_usd")))
            calls += 1
            unpriced += 1 if data.get("priced") is False else 0
            model = str(data.get("model") or "") or model
        if len(events) < PAGE:
            break
        after = events[-1].seq
    if calls == 0:
        return None
    return Spend(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=round(cost, 8),
        calls=calls,
        unpriced=unpriced,
        model=model,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def last_worker(task: Task) -> str | None:
    """The worker that ran the task's latest attempt that was charged, if known."""
    entries = [e for e in task.data.spend_log if not e.kind and e.member]
    return max(entries, key=lambda e: e.attempt).member if entries else None


def stuck_workers(tasks: list[Task]) -> set[str]:
    """Workers that may still be busy with an attempt the leader gave up on: it has not
    reported since. A new attempt goes to another idle worker first."""
    return {
        e.member
        for t in tasks
        if t.state not in ("done", "cancelled")
        for e in t.data.spend_log
        if e.awaiting and e.member
    }


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
