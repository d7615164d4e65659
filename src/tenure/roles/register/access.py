"""Typed reads and fenced, sealed writes of one team's register.

Every write is a compare-and-set on the state and version the caller read, at
the epoch ``epoch()`` gives: a leader's raises ``LeaseLost`` once its own lease
deadline passed, and the store refuses a stale one as well. With credentials
every write carries its writer's seal (``roles.register.seal``) and every read
is checked for one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tenure.coord import LEAD, Credentials
from tenure.protocol import to_dict
from tenure.protocol.secrets import redact_value
from tenure.protocol.taskspec import SEAL_FIELD, AttemptData, TaskSpec
from tenure.roles.register.seal import (
    FINAL_STATES,
    After,
    grant_from,
    resealed,
    seal_data,
    stored,
    stored_text,
)
from tenure.roles.register.task import SPEC, Task, read_task, vouch
from tenure.store import UNSET, Store, TaskRecord, TaskState

__all__ = ["Register", "read_checked", "sealed_transition"]


def read_checked(
    store: Store, record: TaskRecord, credentials: Credentials | None, *, queue: bool = False
) -> Task:
    """``read_task``, and for a finished record it refuses, the seal a leader may have put
    in the ledger for it (``seal.reseal``): the one read every register reader shares."""
    task = read_task(record, credentials, queue=queue)
    if (
        task.problem is not None
        and credentials is not None
        and record.state in FINAL_STATES
        and resealed(store, record, credentials)
    ):
        return read_task(record, credentials, queue=queue)
    return task


class Register:
    """One team's register. With ``credentials`` every spec it writes is signed (by
    the leading role), every write sealed, and every task it reads checked for both;
    ``queue``: queue mode, where any key of the team may seal."""

    def __init__(
        self,
        store: Store,
        team: str,
        epoch: Callable[[], int],
        credentials: Credentials | None = None,
        *,
        queue: bool = False,
        written: Callable[[Task], None] | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.epoch = epoch
        self.credentials = credentials
        self.queue = queue
        self.written = written  # told every task this register writes (a leader's view)

    def on(self, store: Store) -> Register:
        """This register writing through ``store`` (a ``StagedStore``: its writes made
        with others in one commit). It tells nobody what it wrote: a staged write is a
        guess until its commit, and whoever commits tells what was written."""
        return Register(store, self.team, self.epoch, self.credentials, queue=self.queue)

    def read(self, record: TaskRecord) -> Task:
        """A record of this team's register, typed and checked as this register reads."""
        return read_checked(self.store, record, self.credentials, queue=self.queue)

    def tasks(self) -> list[Task]:
        """Every task of the team, oldest first (one full read)."""
        return [self.read(r) for r in self.store.tasks(self.team)]

    def get(self, task_id: str) -> Task:
        return self.read(self.store.get_task(self.team, task_id))

    def signed(self, task_id: str, spec: TaskSpec) -> TaskSpec:
        if self.credentials is None:
            return spec
        clean = TaskSpec.model_validate(
            redact_value(to_dict(spec.model_copy(update={"signature": None})))
        )
        signed = clean.model_copy(update={"signature": self.credentials.sign(SPEC, clean)})
        vouch(self.team, task_id, signed, self.credentials)
        return signed

    def create(self, task_id: str, spec: TaskSpec, *, state: TaskState = "queued") -> Task:
        """Register a task (``Conflict`` if the id is taken)."""
        record = self.store.create_task(
            self.team,
            task_id,
            epoch=self.epoch(),
            spec=to_dict(self.signed(task_id, spec)),
            state=state,
        )
        return self._wrote(self.read(record))

    def create_all(self, tasks: list[tuple[str, TaskSpec]]) -> list[Task]:
        """Register every task whose id is free in one atomic step (all or none);
        returns those created. A plan or a split never lands half-registered."""
        records = self.store.create_tasks(
            self.team,
            [(task_id, to_dict(self.signed(task_id, spec))) for task_id, spec in tasks],
            epoch=self.epoch(),
        )
        return [self._wrote(self.read(record)) for record in records]

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
        """Compare-and-set ``task`` (as read) to ``to``; ``Conflict`` if it changed since.
        A task whose record did not parse (``task.unparsed``) keeps its stored data:
        what was read of it is a placeholder, and writing it would wipe the original."""
        if task.unparsed:
            data = UNSET
        record = sealed_transition(
            self.store,
            task.record,
            to,
            epoch=self.epoch(),
            credentials=self.credentials,
            expect=expect,
            assignee=assignee,
            attempt=attempt,
            result=result,
            reason=reason,
            data=data.dump() if isinstance(data, AttemptData) else data,
            spec=spec if spec is UNSET else to_dict(self.signed(task.task_id, spec)),
        )
        return self._wrote(self.read(record))

    def _wrote(self, task: Task) -> Task:
        if self.written is not None:
            self.written(task)
        return task


def sealed_transition(
    store: Store,
    record: TaskRecord,
    to: TaskState,
    *,
    epoch: int,
    credentials: Credentials | None,
    grant: bool = False,
    expect: Iterable[TaskState] | None = None,
    **changes: Any,
) -> TaskRecord:
    """Compare-and-set ``record`` (as read) to ``to`` with ``changes`` (``UNSET`` keeps a
    field), sealed with ``credentials`` when given. ``grant``: a member sealing the
    record of its own attempt carries the lead's grant of it (``seal.grant_from``)."""
    given = {k: v for k, v in changes.items() if v is not UNSET}
    if credentials is not None:
        given["data"] = _sealed(record, to, given, credentials, grant)
    return store.transition(
        record.team,
        record.task_id,
        epoch=epoch,
        expect=list(expect) if expect is not None else [record.state],
        to=to,
        version=record.version,
        **given,
    )


def _sealed(
    record: TaskRecord, to: TaskState, given: dict[str, Any], credentials: Credentials, grant: bool
) -> dict[str, Any]:
    """The attempt data to write: as given (or as it is), with the writer's seal over
    the record as it will be after this write."""
    assignee = stored_text(given.get("assignee", record.assignee))
    attempt = given.get("attempt", record.attempt)
    data = {k: v for k, v in given.get("data", record.data).items() if k != SEAL_FIELD}
    if grant and credentials.signer != LEAD:
        carried = grant_from(record, credentials)
        if carried is not None:
            data["grant"] = carried
    after = After(
        task_id=record.task_id,
        state=to,
        version=record.version + 1,
        attempt=attempt,
        assignee=assignee,
        result=stored(given["result"]) if "result" in given else record.result,
        reason=(stored_text(given["reason"]) if "reason" in given else record.reason) or "",
        data=stored(data),
        spec=given.get("spec", record.spec),
        created_at=record.created_at,
    )
    return seal_data(credentials, record.team, after)
