"""A register record with its spec and attempt data parsed: what every role reads.

The store returns ``TaskRecord`` with ``spec`` and ``data`` as JSON; ``read_task``
parses them once (a spec that has not changed since the last read is not parsed
again). A record that does not parse — a typo, or something that is not Tenure
writing to the store — still comes back, with ``problem`` saying what is wrong
and an empty spec (or empty data), so the leader can set it aside with the reason
instead of acting on a guess or stalling on it; what could not be read is never
written back (``Register.move`` keeps the stored data of such a task). Read with
credentials, a record whose spec its leadership did not sign, or whose last write
carries no seal its readers accept (``roles.register.seal``), comes back with
``problem`` saying so too, and never reads as done.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tenure.coord import LEAD, Credentials, SignatureRefused
from tenure.protocol import ProtocolError
from tenure.protocol.signing import canonical
from tenure.protocol.taskspec import AttemptData, TaskSpec, parse_data, parse_spec
from tenure.roles.register.seal import Refusal, vouched
from tenure.roles.register.seal import check as check_seal
from tenure.store import TaskRecord, TaskState

__all__ = ["SPEC", "TAMPERED", "UNSIGNED", "Task", "read_task"]

SPEC = "spec"  # what a task spec's signature is over


@dataclass(frozen=True, slots=True)
class Task:
    """One task of the register, typed. ``record`` is what the store holds."""

    record: TaskRecord
    spec: TaskSpec
    data: AttemptData
    problem: str | None = None  # why the record could not be read, if it could not
    tamper: Refusal | None = None  # its last write's seal was refused: by whom, why
    unparsed: bool = False  # its spec or data did not parse: what was read is a placeholder

    @property
    def is_done(self) -> bool:
        """Done, and read as written by the team: what a dependent may build on."""
        return self.record.state == "done" and self.problem is None

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
_SignedKey = tuple[str, str, str, bytes, bytes]  # (team, id, signature, digest, lead key)
_SIGNED: set[_SignedKey] = set()  # verified, or signed by this process
# (team, id) -> the parsed spec (the very object `_spec` hands out while the record's spec
# is unchanged) last verified, and under which lead key: re-reading an unchanged task
# costs an identity check, not a digest
_VERIFIED: dict[tuple[str, str], tuple[TaskSpec, bytes]] = {}
_CACHE_LIMIT = 100_000
UNSIGNED = "not signed by the team's leadership"
TAMPERED = "tampered with in the register"


def read_task(
    record: TaskRecord, credentials: Credentials | None = None, *, queue: bool = False
) -> Task:
    """``record`` with its spec and data parsed (never raises: see ``Task.problem``).

    With ``credentials`` the spec must carry the team's leadership's signature and the
    record a seal its readers accept (any key of the team's in ``queue`` mode): a task
    that something else wrote into the register is read, but never acted on."""
    source = f"task {record.task_id!r} of team {record.team!r} in the register"
    problem: str | None = None
    try:
        spec = _spec(record, source)
    except ProtocolError as exc:
        spec, problem = _placeholder(record), str(exc)
    try:  # the data apart: a spec gone wrong still shows its answers and spend
        data = parse_data(record.data, source=source)
    except ProtocolError as exc:
        return Task(record, spec, AttemptData(), problem or str(exc), unparsed=True)
    if problem is not None:
        return Task(record, spec, data, problem, unparsed=True)
    if credentials is not None and not vouched(record, credentials):
        refused = _unsigned(record, spec, credentials)
        if refused:
            return Task(record, spec, data, f"{UNSIGNED}: {refused}")
        tamper = check_seal(record, credentials, queue=queue)
        if tamper is not None:
            return tampered(record, spec, data, tamper)
    return Task(record, spec, data)


def tampered(record: TaskRecord, spec: TaskSpec, data: AttemptData, tamper: Refusal) -> Task:
    """``record`` read as one whose last write was not the team's."""
    return Task(record, spec, data, f"{TAMPERED}: {tamper.reason}", tamper)


def vouch(team: str, task_id: str, spec: TaskSpec, credentials: Credentials) -> None:
    """Remember a spec this process signed itself: reading it back (a register write
    returns the record) then costs a digest, not a signature check."""
    _remember(_signed_key(team, task_id, spec, credentials.lead_fingerprint))


def _unsigned(record: TaskRecord, spec: TaskSpec, credentials: Credentials) -> str | None:
    lead = credentials.lead_fingerprint
    seen = _VERIFIED.get((record.team, record.task_id))
    if seen is not None and seen[0] is spec and seen[1] == lead:
        return None
    key = _signed_key(record.team, record.task_id, spec, lead)
    if key not in _SIGNED:
        try:
            credentials.verify(SPEC, spec, spec.signature, by=LEAD)
        except SignatureRefused as exc:
            return str(exc)
        _remember(key)
    if len(_VERIFIED) >= _CACHE_LIMIT:
        _VERIFIED.clear()
    _VERIFIED[(record.team, record.task_id)] = (spec, lead)
    return None


def _signed_key(team: str, task_id: str, spec: TaskSpec, lead: bytes) -> _SignedKey:
    signature = spec.signature
    digest = hashlib.sha256(canonical(team, SPEC, spec)).digest()
    return (team, task_id, signature.sig if signature else "", digest, lead)


def _remember(key: _SignedKey) -> None:
    if len(_SIGNED) >= _CACHE_LIMIT:
        _SIGNED.clear()
    _SIGNED.add(key)


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
