"""Typed reads and fenced writes of one team's register.

Every write is a compare-and-set on the state and version the caller read, at
the epoch ``epoch()`` gives: a leader's raises ``LeaseLost`` once its own lease
deadline passed, and the store refuses a stale one as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tenure.coord import Credentials
from tenure.protocol import to_dict
from tenure.protocol.secrets import redact_value
from tenure.protocol.taskspec import AttemptData, TaskSpec
from tenure.roles.register.task import SPEC, Task, read_task
from tenure.store import UNSET, Store, TaskState

__all__ = ["Register"]


class Register:
    """One team's register. With ``credentials`` (the leading role's) every spec it
    writes is signed and every task it reads is checked for that signature."""

    def __init__(
        self,
        store: Store,
        team: str,
        epoch: Callable[[], int],
        credentials: Credentials | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.epoch = epoch
        self.credentials = credentials

    def tasks(self) -> list[Task]:
        """Every task of the team, oldest first (one full read)."""
        return [read_task(r, self.credentials) for r in self.store.tasks(self.team)]

    def get(self, task_id: str) -> Task:
        return read_task(self.store.get_task(self.team, task_id), self.credentials)

    def signed(self, spec: TaskSpec) -> TaskSpec:
        if self.credentials is None:
            return spec
        clean = TaskSpec.model_validate(
            redact_value(to_dict(spec.model_copy(update={"signature": None})))
        )
        return clean.model_copy(update={"signature": self.credentials.sign(SPEC, clean)})

    def create(self, task_id: str, spec: TaskSpec, *, state: TaskState = "queued") -> Task:
        """Register a task (``Conflict`` if the id is taken)."""
        record = self.store.create_task(
            self.team, task_id, epoch=self.epoch(), spec=to_dict(self.signed(spec)), state=state
        )
        return read_task(record, self.credentials)

    def move(
        self,
        task: Task,
        to: TaskState,
        *,
        expect: Iterable[TaskState] | None = None,
        assignee: Any = UNSET,
        attempt: Any = UNSET,
        result: Any = UNSET,
        reason: Any = UNSET,
        data: AttemptData | Any = UNSET,
        spec: TaskSpec | Any = UNSET,
    ) -> Task:
        """Compare-and-set ``task`` (as read) to ``to``; ``Conflict`` if it changed since."""
        record = self.store.transition(
            self.team,
            task.task_id,
            epoch=self.epoch(),
            expect=list(expect) if expect is not None else [task.state],
            to=to,
            version=task.version,
            assignee=assignee,
            attempt=attempt,
            result=result,
            reason=reason,
            data=data.dump() if isinstance(data, AttemptData) else data,
            **({} if spec is UNSET else {"spec": to_dict(self.signed(spec))}),
        )
        return read_task(record, self.credentials)
