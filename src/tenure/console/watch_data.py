"""What ``tenure watch`` shows, read from a store into plain records.

Reading only: a :class:`Watcher` never writes, so it can run beside a live team on
any backend or over a finished store. It keeps two things between refreshes: the
last event it read (the feed continues from there) and the members the event log
has seen join and leave, so a member whose heartbeats stopped shows as ``dead``
rather than vanishing. Everything here is data; the screen is ``watch_app``'s.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from tenure.console.tree import subtree
from tenure.protocol.envelope import Budget
from tenure.roles.register import Task
from tenure.roles.register import spend as budget
from tenure.roles.teams import inbox as runtime
from tenure.roles.teams import reading
from tenure.store import Event, Store

BUSY_STATES = ("running", "review")
STATE_ORDER = ("blocked", "failed", "running", "review", "queued", "cancelled", "done")
FEED_SIZE = 200
PAGES_PER_REFRESH = 20  # a large finished store catches up over a few refreshes
PAGE = 1000


@dataclass(frozen=True)
class TeamRow:
    """One team of the tree: who leads it, at which epoch, for how much longer."""

    team: str
    depth: int  # how many shown ancestors it has
    leader: str | None
    epoch: int
    lease_left: float | None  # seconds until the lease lapses; None when vacant
    counts: dict[str, int]  # tasks by state


@dataclass(frozen=True)
class MemberRow:
    """A member the store has seen: ``busy`` or ``idle`` while live, ``dead`` when its
    heartbeats stopped, ``left`` when it said goodbye."""

    team: str
    member_id: str
    state: str
    task: str | None  # the task it works on (busy), or last held (dead)
    leader: bool
    beat_age: float | None  # seconds since its last heartbeat, while live


@dataclass(frozen=True)
class TaskRow:
    team: str
    task_id: str
    state: str
    attempts: int
    max_attempts: int
    age: float  # seconds in its current state
    assignee: str | None
    reason: str


@dataclass(frozen=True)
class InboxRow:
    """A task waiting for a person; the oldest comes first."""

    team: str
    task_id: str
    state: str
    why: str
    waiting: float
    attempts: int


@dataclass(frozen=True)
class SpendRow:
    """A team's model spend, with its budget's limits when it has one."""

    team: str
    tokens: int
    cost_usd: float
    calls: int
    wall_seconds: float
    limits: Budget | None


@dataclass(frozen=True)
class FeedRow:
    seq: int
    at: float
    team: str
    kind: str
    epoch: int | None
    details: str


@dataclass(frozen=True)
class Snapshot:
    """Everything one refresh of ``tenure watch`` shows."""

    root: str | None
    at: float  # store clock
    teams: list[TeamRow] = field(default_factory=list)
    members: list[MemberRow] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    inbox: list[InboxRow] = field(default_factory=list)
    spend: list[SpendRow] = field(default_factory=list)
    feed: list[FeedRow] = field(default_factory=list)

    @property
    def live_members(self) -> int:
        return sum(1 for m in self.members if m.state in ("busy", "idle"))


class Watcher:
    """Reads snapshots of ``root`` and the teams nested in it (every team when None)."""

    def __init__(self, store: Store, root: str | None = None, feed_size: int = FEED_SIZE) -> None:
        self.store = store
        self.root = root
        self.after = 0  # the last event read
        self.feed: deque[FeedRow] = deque(maxlen=feed_size)
        self.seen: dict[tuple[str, str], str] = {}  # (team, member) -> joined / left

    def snapshot(self) -> Snapshot:
        teams = subtree(self.store.teams(), self.root)
        self._read_events(set(teams))
        now = self.store.now()
        snap = Snapshot(root=self.root, at=now, feed=list(self.feed))
        shown = set(teams)
        for team in teams:
            tasks = reading.tasks(self.store, team)
            snap.teams.append(self._team_row(team, _depth(team, shown), tasks, now))
            snap.members.extend(self._member_rows(team, tasks, now))
            snap.tasks.extend(_task_row(t, now) for t in _by_state(tasks))
            snap.spend.append(_spend_row(team, tasks, now))
        waiting = runtime.inbox(self.store, teams)
        snap.inbox.extend(
            InboxRow(i.team, i.task.task_id, i.task.state, i.why, i.waiting_seconds, i.task.attempt)
            for i in sorted(waiting, key=lambda i: -i.waiting_seconds)
        )
        return snap

    def _read_events(self, teams: set[str]) -> None:
        """Read the events since the last refresh: the feed, and who joined and left."""
        for _ in range(PAGES_PER_REFRESH):
            page = self.store.events(None, after=self.after, limit=PAGE)
            if not page:
                return
            self.after = page[-1].seq
            for event in page:
                if event.team in teams:
                    self._note(event)

    def _note(self, event: Event) -> None:
        member = event.data.get("member")
        if event.kind in ("member.joined", "member.left") and isinstance(member, str):
            self.seen[(event.team, member)] = event.kind.rsplit(".", 1)[1]
        details = " ".join(f"{k}={v}" for k, v in event.data.items())
        self.feed.append(FeedRow(event.seq, event.at, event.team, event.kind, event.epoch, details))

    def _team_row(self, team: str, depth: int, tasks: list[Task], now: float) -> TeamRow:
        lease = self.store.current_lease(team)
        counts: Counter[str] = Counter(t.state for t in tasks)
        return TeamRow(
            team=team,
            depth=depth,
            leader=lease.holder if lease else None,
            epoch=self.store.current_epoch(team),
            lease_left=lease.expires_at - now if lease else None,
            counts={s: counts[s] for s in STATE_ORDER if counts[s]},
        )

    def _member_rows(self, team: str, tasks: list[Task], now: float) -> list[MemberRow]:
        lease = self.store.current_lease(team)
        leader = lease.holder if lease else None
        working = {t.assignee: t.task_id for t in tasks if t.state in BUSY_STATES and t.assignee}
        rows = []
        live = self.store.members(team)
        for member in live:
            task = working.get(member.member_id)
            rows.append(
                MemberRow(
                    team,
                    member.member_id,
                    "busy" if task else "idle",
                    task,
                    member.member_id == leader,
                    now - member.beat_at if member.beat_at else None,
                )
            )
        gone = {m for (t, m), _ in self.seen.items() if t == team} | set(working)
        for member_id in sorted(gone - {m.member_id for m in live}):
            state = "left" if self.seen.get((team, member_id)) == "left" else "dead"
            rows.append(MemberRow(team, member_id, state, working.get(member_id), False, None))
        return rows


def _depth(team: str, shown: set[str]) -> int:
    depth, parent = 0, team
    while "/" in parent:
        parent = parent.rsplit("/", 1)[0]
        if parent in shown:
            depth += 1
    return depth


def _by_state(tasks: list[Task]) -> list[Task]:
    """Those that need a person first, then by state, oldest first within one."""
    order = {state: i for i, state in enumerate(STATE_ORDER)}
    return sorted(tasks, key=lambda t: (order.get(t.state, len(order)), t.updated_at))


def _task_row(task: Task, now: float) -> TaskRow:
    return TaskRow(
        team=task.team,
        task_id=task.task_id,
        state=task.state,
        attempts=task.attempt,
        max_attempts=task.spec.max_attempts,
        age=now - task.updated_at,
        assignee=task.assignee,
        reason=task.reason,
    )


def _spend_row(team: str, tasks: list[Task], now: float) -> SpendRow:
    totals = budget.team_totals(tasks)
    return SpendRow(
        team=team,
        tokens=totals.tokens,
        cost_usd=totals.cost_usd,
        calls=totals.calls,
        wall_seconds=budget.team_seconds(tasks, now),
        limits=next((t.spec.team_budget for t in tasks if t.spec.team_budget), None),
    )
