"""The leader's view of its team's register, kept current from the event log.

Reading the whole register every round costs time in proportion to the plan
(every record decoded, on Redis one large reply). Every change to a task
appends an event in the same transaction, so after one full read the view
only re-reads the tasks that events name since the last round. The store
stays the authority: every write is still a fenced compare-and-set, so a
view one event behind can only cause a refused write, never a wrong one.
"""

from __future__ import annotations

from tenure.coord import Credentials
from tenure.protocol import TenureError
from tenure.protocol.errors import NotFound
from tenure.roles.register.task import Task, read_task
from tenure.store import Store

TASK_EVENTS = frozenset({"task.created", "task.transition"})
PAGE = 1000


class RegisterView:
    def __init__(self, store: Store, team: str, credentials: Credentials | None = None) -> None:
        self.store = store
        self.team = team
        self.credentials = credentials  # checks every spec's signature (``read_task``)
        self._tasks: dict[str, Task] = {}
        self._after: int | None = None

    def tasks(self) -> list[Task]:
        """Every task of the team, oldest first, as of now."""
        if self._after is None:
            return self._full_read()
        changed = self._changed_since_last_read()
        if changed is None:
            return self._full_read()
        for task_id in changed:
            try:
                self._tasks[task_id] = read_task(self.store.get_task(self.team, task_id), self.credentials)
            except NotFound:
                return self._full_read()  # the store forgot (e.g. a wiped Redis)
        return list(self._tasks.values())

    def _full_read(self) -> list[Task]:
        after = self._last_seq()
        tasks = [read_task(r, self.credentials) for r in self.store.tasks(self.team)]
        self._tasks = {t.task_id: t for t in tasks}
        self._after = after
        return tasks

    def _changed_since_last_read(self) -> list[str] | None:
        """Task ids named by events since the last read (None: start over)."""
        assert self._after is not None
        changed: dict[str, None] = {}
        while True:
            events = self.store.events(self.team, after=self._after, limit=PAGE)
            for event in events:
                if event.seq <= self._after:
                    return None  # the log went backwards: the store lost its state
                self._after = event.seq
                task_id = event.data.get("task_id")
                if event.kind in TASK_EVENTS and isinstance(task_id, str):
                    changed[task_id] = None
                    if task_id not in self._tasks and event.kind != "task.created":
                        return None
            if len(events) < PAGE:
                return list(changed)

    def _last_seq(self) -> int:
        """The newest event's seq (one indexed read, however long the log)."""
        try:
            return self.store.last_event_seq(self.team)
        except TenureError:
            return self._after or 0
