"""A register record with its spec and attempt data parsed: what every role reads.

The store returns ``TaskRecord`` with ``spec`` and ``data`` as JSON; ``read_task``
parses them once (a spec that has not changed since the last read is not parsed
again). A record that does not parse — a typo, or something that is not Tenure
writing to the store — still comes back, with ``problem`` saying what is wrong
and an empty spec, so the leader can set it aside with the reason instead of
acting on a guess or stalling on it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tenure.coord import LEAD, Credentials, SignatureRefused
from tenure.protocol import ProtocolError
from tenure.protocol.signing import canonical
from tenure.protocol.taskspec import AttemptData, TaskSpec, parse_data, parse_spec
from tenure.store import TaskRecord, TaskState

__all__ = ["SPEC", "UNSIGNED", "Task", "read_task"]

SPEC = "spec"  # what a task spec's signature is over


@dataclass(frozen=True, slots=True)
class Task:
    """One task of the register, typed. ``record`` is what the store holds."""

    record: TaskRecord
    spec: TaskSpec
    data: AttemptData
    problem: str | None = None  # why the record could not be read, if it could not

    @property
    def task_id(self) -> str:
        return self.record.task_id

    @property
    def team(self) -> str:
        return self.record.team

    @property
    def state(self) -> TaskState:
        return self.record.state

    @property
    def version(self) -> int:
        return self.record.version

    @property
    def epoch(self) -> int:
        return self.record.epoch

    @property
    def attempt(self) -> int:
        return self.record.attempt

    @property
    def assignee(self) -> str | None:
        return self.record.assignee

    @property
    def result(self) -> dict[str, Any] | None:
        return self.record.result

    @property
    def reason(self) -> str:
        return self.record.reason

    @property
    def created_at(self) -> float:
        return self.record.created_at

    @property
    def updated_at(self) -> float:
        return self.record.updated_at

    @property
    def used_attempts(self) -> int:
        """Attempts since the operator last answered it (an answer gives fresh ones)."""
        return self.attempt - self.data.attempt_base


_SPECS: dict[tuple[str, str], tuple[dict[str, Any], TaskSpec]] = {}
_SIGNED: set[tuple[str, str, str, bytes]] = set()  # (team, id, signature, digest) verified
_CACHE_LIMIT = 100_000
UNSIGNED = "not signed by the team's leadership"


def read_task(record: TaskRecord, credentials: Credentials | None = None) -> Task:
    """``record`` with its spec and data parsed (never raises: see ``Task.problem``).

    With ``credentials`` the spec must carry the team's leadership's signature: a
    task that something else wrote into the register is read, but never acted on."""
    source = f"task {record.task_id!r} of team {record.team!r} in the register"
    try:
        spec = _spec(record, source)
        data = parse_data(record.data, source=source)
    except ProtocolError as exc:
        return Task(record, _placeholder(record), AttemptData(), str(exc))
    if credentials is not None:
        refused = _unsigned(record, spec, credentials)
        if refused:
            return Task(record, spec, data, f"{UNSIGNED}: {refused}")
    return Task(record, spec, data)


def _unsigned(record: TaskRecord, spec: TaskSpec, credentials: Credentials) -> str | None:
    signature = spec.signature
    digest = hashlib.sha256(canonical(record.team, SPEC, spec)).digest()
    key = (record.team, record.task_id, signature.sig if signature else "", digest)
    if key in _SIGNED:
        return None
    try:
        credentials.verify(SPEC, spec, signature, by=LEAD)
    except SignatureRefused as exc:
        return str(exc)
    if len(_SIGNED) >= _CACHE_LIMIT:
        _SIGNED.clear()
    _SIGNED.add(key)
    return None


def _spec(record: TaskRecord, source: str) -> TaskSpec:
    key = (record.team, record.task_id)
    cached = _SPECS.get(key)
    if cached is not None and cached[0] == record.spec:
        return cached[1]
    raw = {"id": record.task_id, **record.spec} if isinstance(record.spec, dict) else record.spec
    spec = parse_spec(raw, source=source)
    if spec.id != record.task_id:
        raise ProtocolError("spec.id", f"{record.task_id!r}, the task's own id", source=source)
    if len(_SPECS) >= _CACHE_LIMIT:
        _SPECS.clear()
    _SPECS[key] = (record.spec, spec)
    return spec


def _placeholder(record: TaskRecord) -> TaskSpec:
    """The spec of a record that could not be read: never dispatched, only set aside."""
    return TaskSpec.model_construct(id=record.task_id, goal="(unreadable register entry)")
