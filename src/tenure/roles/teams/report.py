"""What a team's run report shows, gathered from its store: plain data, no markup.

``tenure report`` renders it (``console.report_html``); a program may read it too. It
only reads the store, so it can run beside a live leader. It holds the plan (tasks,
their dependencies and dependency depth), every attempt pieced together from the event
log (dispatched, claimed, reported, judged), the leaders and their epochs (a failover is
a lease taken by another holder), members joining and leaving, the decision log, the
inbox history, the spend and the failures with their reasons. Text here is as members
wrote it: whoever shows it escapes and redacts it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tenure.roles.register import Task
from tenure.roles.register import spend as budget
from tenure.roles.teams import reading
from tenure.roles.teams.reading import DecisionRecord
from tenure.store import Event, Store

__all__ = [
    "AttemptRow",
    "InboxRow",
    "LeaderTerm",
    "MemberMark",
    "Report",
    "TaskRow",
    "gather",
]

PAGE = 1000
_KEY = re.compile(r"^(?P<task>.+):attempt-(?P<n>\d+)$")
INBOX_KINDS = {"inbox.added": "waiting", "inbox.answered": "answered", "inbox.requeued": "requeued"}
TROUBLE_KINDS = (
    "leader.result_refused",
    "security.result_refused",
    "leader.unreadable_task",
    "leader.error",
    "leader.stepped_down",
    "worker.orphan_reaped",
    "message.dead_lettered",
    "budget.exceeded",
    "task.stopped",
)


@dataclass
class AttemptRow:
    """One attempt of one task: who ran it, at which epoch, when, and how it ended.

    ``outcome`` is ``accepted``, ``retried``, ``blocked``, ``failed``, ``cancelled``,
    ``given up`` (the leader moved on without its result: a deadline, a member that
    died) or ``open`` (nothing settled it yet); ``status`` is what the member reported
    (``completed``, ``failed``, ``blocked``, ``refused``) if it reported."""

    task_id: str
    attempt: int
    member: str | None = None
    epoch: int | None = None
    dispatched_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    status: str | None = None
    outcome: str = "open"
    reason: str = ""
    verdicts: list[DecisionRecord] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.task_id}:attempt-{self.attempt}"

    @property
    def began(self) -> float | None:
        return self.started_at if self.started_at is not None else self.dispatched_at


@dataclass(frozen=True)
class TaskRow:
    """A task of the plan as the register holds it now, with its place in the graph."""

    task: Task
    depth: int
    spend: budget.Totals

    @property
    def task_id(self) -> str:
        return self.task.task_id


@dataclass
class LeaderTerm:
    """One lease: its holder and epoch, from the claim to its release (or the next
    claim). ``failover`` when it took over from another holder without a release."""

    holder: str
    epoch: int
    started_at: float
    ended_at: float | None = None
    failover: bool = False
    seized_from: str | None = None


@dataclass(frozen=True)
class MemberMark:
    """A member joining or leaving."""

    at: float
    member: str
    kind: str  # joined | left


@dataclass(frozen=True)
class InboxRow:
    """An entry of the inbox history: a task sent to a person, answered, re-queued."""

    at: float
    task_id: str
    kind: str  # waiting | answered | requeued
    text: str


@dataclass(frozen=True)
class Report:
    team: str
    store_url: str
    generated_at: float
    epoch: int
    leader: str | None
    tasks: list[TaskRow]
    attempts: list[AttemptRow]
    terms: list[LeaderTerm]
    members: list[MemberMark]
    decisions: list[DecisionRecord]
    inbox: list[InboxRow]
    trouble: list[Event]
    totals: budget.Totals
    first_seq: int
    last_seq: int
    started_at: float | None
    ended_at: float | None

    @property
    def failures(self) -> list[AttemptRow]:
        """Every attempt that did not end accepted (an open one is not a failure yet)."""
        return [a for a in self.attempts if a.outcome not in ("accepted", "open")]


def gather(store: Store, team: str) -> Report:
    """The report of ``team`` as its store holds it now."""
    events = _events(store, team)
    tasks = reading.tasks(store, team)
    depths = dependency_depths({t.task_id: list(t.spec.depends_on) for t in tasks})
    rows = [TaskRow(t, depths[t.task_id], budget.task_totals(t)) for t in tasks]
    decisions = [reading.read_decision(e) for e in events if e.kind in reading.DECISION_KINDS]
    lease = store.current_lease(team)
    return Report(
        team=team,
        store_url=store.url,
        generated_at=store.now(),
        epoch=store.current_epoch(team),
        leader=lease.holder if lease else None,
        tasks=sorted(rows, key=lambda r: (r.depth, r.task.created_at, r.task_id)),
        attempts=attempts(events, decisions),
        terms=terms(events),
        members=[
            MemberMark(e.at, str(e.data.get("member", "?")), e.kind.split(".")[1])
            for e in events
            if e.kind in ("member.joined", "member.left")
        ],
        decisions=decisions,
        inbox=[
            InboxRow(
                e.at,
                str(e.data.get("task_id", "")),
                INBOX_KINDS[e.kind],
                str(e.data.get("reason") or e.data.get("answer") or e.data.get("answered") or ""),
            )
            for e in events
            if e.kind in INBOX_KINDS
        ],
        trouble=[e for e in events if e.kind in TROUBLE_KINDS],
        totals=budget.team_totals(tasks),
        first_seq=events[0].seq if events else 0,
        last_seq=events[-1].seq if events else 0,
        started_at=events[0].at if events else None,
        ended_at=events[-1].at if events else None,
    )


def dependency_depths(depends: dict[str, list[str]]) -> dict[str, int]:
    """Each task's depth: 0 without dependencies, else one more than its deepest
    dependency. A dependency outside the team counts as depth -1; a cycle (which a
    valid plan never has) is cut where it closes."""
    depths: dict[str, int] = {}

    def depth(task_id: str, path: frozenset[str]) -> int:
        if task_id in depths:
            return depths[task_id]
        parents = [d for d in depends.get(task_id, []) if d in depends and d not in path]
        found = 1 + max((depth(d, path | {task_id}) for d in parents), default=-1)
        depths[task_id] = found
        return found

    for task_id in depends:
        depth(task_id, frozenset())
    return depths


def attempts(events: list[Event], decisions: list[DecisionRecord]) -> list[AttemptRow]:
    """Every attempt the log tells of, in the order they began."""
    found: dict[tuple[str, int], AttemptRow] = {}
    current: dict[str, AttemptRow] = {}  # task id -> its latest attempt

    def row(task_id: str, n: int) -> AttemptRow:
        if (task_id, n) not in found:
            found[task_id, n] = AttemptRow(task_id, n)
        current[task_id] = found[task_id, n]
        return found[task_id, n]

    for event in events:
        data = event.data
        if event.kind == "task.dispatched":
            parsed = _key(data.get("key"))
            if parsed:
                attempt = row(*parsed)
                attempt.member = str(data.get("assignee") or attempt.member or "") or None
                attempt.epoch = event.epoch
                attempt.dispatched_at = event.at
        elif event.kind == "effect.claimed":
            parsed = _key(data.get("key"))
            if parsed:
                attempt = row(*parsed)
                attempt.member = attempt.member or str(data.get("holder") or "") or None
                if attempt.started_at is None:
                    attempt.started_at = event.at
                attempt.epoch = attempt.epoch if attempt.epoch is not None else event.epoch
        elif event.kind == "task.transition":
            _transition(event, current, row)
    by_key = {a.key: a for a in found.values()}
    for record in decisions:
        refs = [str(i.get("ref")) if isinstance(i, dict) else str(i) for i in record.inputs]
        key = next((k for k in [str(record.data.get("key") or ""), *refs] if k in by_key), None)
        if key is not None:
            by_key[key].verdicts.append(record)
    return sorted(found.values(), key=lambda a: (a.began or 0.0, a.task_id, a.attempt))


def _transition(
    event: Event, current: dict[str, AttemptRow], row: Callable[[str, int], AttemptRow]
) -> None:
    """An attempt's numbering, its report and its fate, from one register change."""
    data = event.data
    task_id = str(data.get("task_id", ""))
    if isinstance(data.get("attempt"), int) and data["attempt"] > 0:
        numbered = row(task_id, data["attempt"])
        if data.get("assignee"):
            numbered.member = str(data["assignee"])
    attempt = current.get(task_id)
    if attempt is None:
        return
    before, after = data.get("from"), data.get("to")
    if before == "queued" and after == "running" and attempt.started_at is None:
        attempt.started_at = event.at
    result = data.get("result")
    if after == "review" and isinstance(result, dict):
        attempt.status = str(result.get("status") or "") or None
        attempt.ended_at = event.at
        attempt.epoch = attempt.epoch if attempt.epoch is not None else event.epoch
        return
    if before == after or attempt.outcome != "open":
        return
    fate = {"done": "accepted", "blocked": "blocked", "failed": "failed", "cancelled": "cancelled"}
    if after in fate:
        attempt.outcome = fate[str(after)]
    elif after == "queued" and before == "review":
        attempt.outcome = "retried"
    elif after == "queued" and before == "running":
        attempt.outcome = "given up"  # no result came: a deadline, a member that went away
    else:
        return
    attempt.reason = str(data.get("reason") or "")
    if attempt.ended_at is None:
        attempt.ended_at = event.at


def terms(events: list[Event]) -> list[LeaderTerm]:
    """The leases of the team in order; a claim while another term is open ends it,
    and counts as a failover when its holder is someone else."""
    found: list[LeaderTerm] = []
    for event in events:
        data = event.data
        if event.kind == "lease.claimed" and event.epoch is not None:
            holder = str(data.get("holder", "?"))
            previous = found[-1] if found and found[-1].ended_at is None else None
            if previous is not None:  # never released: it lapsed, or its holder died
                previous.ended_at = event.at
            seized = data.get("over_holder")
            found.append(
                LeaderTerm(
                    holder,
                    event.epoch,
                    event.at,
                    failover=bool(seized) or (previous is not None and previous.holder != holder),
                    seized_from=None if seized is None else str(seized),
                )
            )
        elif event.kind == "lease.released" and found and found[-1].ended_at is None:
            found[-1].ended_at = event.at
    return found


def _key(value: object) -> tuple[str, int] | None:
    match = _KEY.match(str(value or ""))
    return (match["task"], int(match["n"])) if match else None


def _events(store: Store, team: str) -> list[Event]:
    found: list[Event] = []
    after = 0
    while True:
        page = store.events(team, after=after, limit=PAGE)
        found += page
        if len(page) < PAGE:
            return found
        after = page[-1].seq
