"""The leader's view of its team's register, kept current from the event log.

Reading the whole register every round costs time in proportion to the plan
(every record decoded, on Redis one large reply). Every change to a task
appends an event in the same transaction, so after one full read the view
only re-reads the tasks that events name since the last round — and not even those
when the events say the whole change (a new state and version, no new data or spec),
nor the leader's own writes (``note``). The store
stays the authority: every write is still a fenced compare-and-set, so a
view one event behind can only cause a refused write, never a wrong one.
"""

from __future__ import annotations

from dataclasses import replace

from tenure.coord import Credentials
from tenure.protocol import TenureError
from tenure.roles.register.access import read_checked
from tenure.roles.register.task import Task
from tenure.store import Event, Store

TASK_EVENTS = frozenset({"task.created", "task.transition"})
FOLLOWED = ("assignee", "attempt", "result", "reason")
"""The fields a transition event carries whole: a change of only these (and the state)
can be followed from the event without reading the task."""
PAGE = 1000


class RegisterView:
    def __init__(self, store: Store, team: str, credentials: Credentials | None = None) -> None:
        self.store = store
        self.team = team
        self.credentials = credentials  # checks every spec's signature and seal (``read_task``)
        self._tasks: dict[str, Task] = {}
        self._after: int | None = None

    @property
    def seq(self) -> int:
        """The newest event this view has read (0 before the first read)."""
        return self._after or 0

    def get(self, task_id: str) -> Task | None:
        """A task as of the last read (or note), without reading the store."""
        return self._tasks.get(task_id)

    def note(self, task: Task) -> None:
        """A task as its owner just wrote it: the events of that write then need no read."""
        known = self._tasks.get(task.task_id)
        if known is None or known.version < task.version:
            self._tasks[task.task_id] = task

    def known(self) -> list[Task]:
        """Every task as of the last read and what was noted since, without reading the
        store: the view within a round, after the leader's own writes."""
        return list(self._tasks.values())

    def tasks(self) -> list[Task]:
        """Every task of the team, oldest first, as of now."""
        if self._after is None:
            return self._full_read()
        changed = self._changed_since_last_read()
        if changed is None:
            return self._full_read()
        stale = [task_id for task_id, events in changed.items() if not self._follow(task_id, events)]
        if stale:
            records = self.store.get_tasks(self.team, stale)
            if len(records) < len(stale):
                return self._full_read()  # the store forgot (e.g. a wiped Redis)
            for record in records:
                self._tasks[record.task_id] = read_checked(self.store, record, self.credentials)
        return list(self._tasks.values())

    def _follow(self, task_id: str, events: list[Event]) -> bool:
        """Bring a known task up to date from its events alone, when they say all there
        is to say: each one the next version, none replacing its data or spec (a member
        starting its attempt, say). True if done (nothing to read), or already current."""
        known = self._tasks.get(task_id)
        if known is None:
            return False
        record = known.record
        for event in events:
            if event.kind == "task.created":
                continue  # registered by this leader: noted as it was made
            said = event.data.get("version")
            if not isinstance(said, int) or event.kind != "task.transition":
                return False
            if said <= record.version:
                continue  # a write already noted
            quiet = event.data.get("data") or event.data.get("spec")
            if said != record.version + 1 or quiet or event.epoch is None:
                return False
            changes = {k: event.data[k] for k in FOLLOWED if k in event.data}
            record = replace(
                record,
                state=event.data.get("to", record.state),
                version=said,
                epoch=event.epoch,
                updated_at=event.at,
                **changes,
            )
        if record is not known.record:
            self._tasks[task_id] = read_checked(self.store, record, self.credentials)
        return True

    def _full_read(self) -> list[Task]:
        after = self._last_seq()
        tasks = [read_checked(self.store, r, self.credentials) for r in self.store.tasks(self.team)]
        self._tasks = {t.task_id: t for t in tasks}
        self._after = after
        return tasks

    def _changed_since_last_read(self) -> dict[str, list[Event]] | None:
        """The events of each task named since the last read, in order; None: start over."""
        assert self._after is not None
        changed: dict[str, list[Event]] = {}
        while True:
            events = self.store.events(self.team, after=self._after, limit=PAGE)
            for event in events:
                if event.seq <= self._after:
                    return None  # the log went backwards: the store lost its state
                self._after = event.seq
                task_id = event.data.get("task_id")
                if event.kind not in TASK_EVENTS or not isinstance(task_id, str):
                    continue
                if task_id not in self._tasks and event.kind != "task.created":
                    return None
                changed.setdefault(task_id, []).append(event)
            if len(events) < PAGE:
                return changed

    def _last_seq(self) -> int:
        """The newest event's seq (one indexed read, however long the log)."""
        try:
            return self.store.last_event_seq(self.team)
        except TenureError:
            return self._after or 0
