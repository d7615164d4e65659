"""Seals: every register write signed by its writer, checked by every reader with keys.

A task's spec is signed when it is registered; what happens to the task after that —
its state, attempt, assignee, result, reason and attempt data — is written by many
hands (the leader, the member running it, the operator). Without a signature on those
writes, anything that can reach the store could mark a task ``done`` with a result of
its choosing and the team would build on it. So each write carries a **seal**: the
writer's signature over the record as it is after the write (``seal_body``), kept in
the attempt data under ``seal`` (every backend stores the data as it is, so no schema
changes), its digest taken without the seal itself.

Who may seal what (``check``):

- a record as registered (version 1, ``queued``, attempt 0, nothing else) is covered
  by its spec's signature;
- a member's start of its attempt (``Store.begin_attempt``: ``queued`` to ``running``
  and nothing else, in queue mode naming itself the assignee), or its undoing (back to
  ``queued``: a member that stopped), is covered by the seal of the record it started
  from: the record carries that seal, which the reader checks
  against the record as it was (``queued``, one version before, and in queue mode no
  assignee). So a start costs no signature, and the one thing anybody could make of
  it — an assigned attempt shown as started — is what its member does anyway;
- any other record: the leading role; or, for ``running``, the assignee's own key,
  with a **grant** in the data: the lead's last seal of the record, which assigned
  that very attempt to that member (a member cannot seal its way into another
  member's task). The member copies it there when it first seals the record; it
  costs the lead no signature, and a leader that made it verifies nothing twice;
- in queue mode (no leader) any key of the team.

A check is remembered by (team, task, version, seal, lead key): an unchanged record
is verified once per process, and a record this process sealed itself not at all.

A finished record (``done``, ``cancelled``) cannot be written again, so when a
leader signs one anew — after ``tenure keys rotate``, or adopting what a run without
keys did — its seal goes into the idempotency ledger instead (``reseal:...``), where
every leader reading the record finds it (``resealed``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from tenure.coord import ANYONE, LEAD, Credentials, SignatureRefused
from tenure.protocol import TenureError
from tenure.protocol.envelope import Signature
from tenure.protocol.errors import EffectInProgress
from tenure.protocol.secrets import redact_text, redact_value
from tenure.protocol.taskspec import SEAL_FIELD, Grant
from tenure.store import Store, TaskRecord, TaskState

__all__ = [
    "FINAL_STATES",
    "SEAL",
    "UNSEALED",
    "After",
    "Refusal",
    "by_previous_lead",
    "check",
    "digest",
    "forget",
    "grant_from",
    "initial",
    "reseal",
    "reseal_key",
    "resealed",
    "seal_body",
    "seal_data",
    "stored",
    "stored_text",
    "vouched",
]

SEAL = "seal"  # the kind of body a seal signs
UNSEALED = "unsealed"  # the claimed signer of a record that carries no seal
_CACHE_LIMIT = 100_000
FINAL_STATES = ("done", "cancelled")
RESEAL = "reseal"  # ledger keys of seals of finished records: reseal:<task>:<version>:<created>
_SealKey = tuple[str, str, int, str, bytes]  # (team, task, version, seal, lead key)
_SEALED: set[_SealKey] = set()
_RecordKey = tuple[str, str, int, float, bytes]  # (team, task, version, created, lead key)
_VOUCHED: set[_RecordKey] = set()  # finished records whose seal is in the ledger


@dataclass(frozen=True)
class Refusal:
    """Why a record's seal is not accepted, and who it says sealed it."""

    claimed: str
    reason: str


@dataclass(frozen=True)
class After:
    """A task's record as it will be after a write: what its seal covers."""

    task_id: str
    state: TaskState
    version: int
    attempt: int
    assignee: str | None
    result: dict[str, Any] | None
    reason: str
    data: dict[str, Any]  # without the seal, as the store will keep it
    spec: dict[str, Any]
    created_at: float

    @classmethod
    def of(cls, record: TaskRecord) -> After:
        data = {k: v for k, v in record.data.items() if k != SEAL_FIELD}
        return cls(
            record.task_id,
            record.state,
            record.version,
            record.attempt,
            record.assignee,
            record.result,
            record.reason or "",
            data,
            record.spec,
            record.created_at,
        )


def digest(value: Any) -> str:
    """SHA-256 of ``value`` as canonical JSON (keys sorted, no whitespace); what is no
    JSON becomes its text, as the stores write it."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def seal_body(after: After) -> dict[str, Any]:
    """What a seal signs (the team is added by the signature itself)."""
    signature = after.spec.get("signature")
    sig = signature.get("sig") if isinstance(signature, dict) else None
    return {
        "task_id": after.task_id,
        "state": after.state,
        "version": after.version,
        "attempt": after.attempt,
        "assignee": after.assignee,
        "created": after.created_at,
        # a signed spec is named by its signature; an unsigned one by its digest
        "spec": sig if isinstance(sig, str) else f"sha256:{digest(after.spec)}",
        "result": None if after.result is None else digest(after.result),
        "reason": after.reason,
        "data": digest(after.data),
    }


def stored(value: Any) -> Any:
    """``value`` as the store will keep it, known secrets taken out. (Its digest is
    that of the JSON the store writes and readers load: ``digest`` serialises it the
    same way, so no round trip through JSON is needed here.)"""
    return redact_value(value)


def stored_text(value: str | None) -> str | None:
    return None if value is None else redact_text(value)


def seal_data(credentials: Credentials, team: str, after: After) -> dict[str, Any]:
    """The attempt data to write: ``after.data`` with the writer's seal over ``after``."""
    seal = credentials.sign(SEAL, seal_body(after))
    _remember((team, after.task_id, after.version, seal.sig, credentials.lead_fingerprint))
    return {**after.data, SEAL_FIELD: seal.model_dump(mode="json")}


def grant_from(record: TaskRecord, credentials: Credentials) -> dict[str, Any] | None:
    """The grant a member carries into its own seal of ``record``'s next version: the
    lead's seal of ``record`` if the lead sealed it — as it stands, or the record the
    member's start was made from (``started``) —, else the grant it already carries (a
    member's second write of its own attempt); None if there is neither."""
    raw = record.data.get(SEAL_FIELD)
    if isinstance(raw, dict) and raw.get("by") == LEAD:
        data = {k: v for k, v in record.data.items() if k != SEAL_FIELD}
        sealed = _lead_sealed(record, raw, credentials)
        if sealed is not None:
            grant = {"state": sealed.state, "version": sealed.version, "data": digest(data)}
            return {**grant, "seal": raw}
    held = record.data.get("grant")
    return held if isinstance(held, dict) else None


def _lead_sealed(record: TaskRecord, raw: dict[str, Any], credentials: Credentials) -> After | None:
    """The record the lead's seal ``raw`` covers: ``record`` itself, or the record its
    member's start was made from."""
    try:
        seal = Signature.model_validate(raw)
    except ValidationError:
        return None
    for candidate in [After.of(record), *started(record, queue=False)]:
        try:
            credentials.verify(SEAL, seal_body(candidate), seal, by=LEAD)
        except SignatureRefused:
            continue
        return candidate
    return None


def _granted_body(record: TaskRecord, grant: Grant) -> dict[str, Any]:
    """The seal body of the record the lead sealed, as the grant names it."""
    after = replace(After.of(record), state=grant.state, version=grant.version)  # type: ignore[arg-type]
    body = seal_body(after)
    body["data"] = grant.data
    return body


def initial(record: TaskRecord) -> bool:
    """A record as registered, which its spec's signature covers."""
    return (
        record.version == 1
        and record.state == "queued"
        and record.attempt == 0
        and record.assignee is None
        and record.result is None
        and not record.reason
        and not record.data
    )


def vouched(record: TaskRecord, credentials: Credentials) -> bool:
    """True if this process found (or wrote) the ledger seal of this finished record."""
    return _record_key(record, credentials) in _VOUCHED


def _record_key(record: TaskRecord, credentials: Credentials) -> _RecordKey:
    lead = credentials.lead_fingerprint
    return (record.team, record.task_id, record.version, record.created_at, lead)


def reseal_key(record: TaskRecord) -> str:
    return f"{RESEAL}:{record.task_id}:{record.version}:{record.created_at!r}"


def reseal(
    store: Store, record: TaskRecord, credentials: Credentials, *, epoch: int, holder: str
) -> bool:
    """Seal a finished ``record`` as it stands, with the lead key, in the ledger."""
    key = reseal_key(record)
    made = credentials.sign(SEAL, seal_body(After.of(record)))
    try:
        ticket = store.effect_begin(record.team, key, epoch=epoch, holder=holder, claim_seconds=30)
    except EffectInProgress:
        return False
    if ticket.status == "run":
        store.effect_finish(record.team, key, holder=holder, result={"seal": made.model_dump()})
    return resealed(store, record, credentials)


def resealed(store: Store, record: TaskRecord, credentials: Credentials) -> bool:
    """True if the ledger holds a lead seal of this finished ``record`` as it stands."""
    if record.state not in FINAL_STATES:
        return False
    try:
        entry = store.effect_lookup(record.team, reseal_key(record))
        if entry is None or not isinstance(entry.result, dict):
            return False
        made = Signature.model_validate(entry.result.get("seal"))
        credentials.verify(SEAL, seal_body(After.of(record)), made, by=LEAD)
    except (ValidationError, SignatureRefused, TenureError):
        return False
    if len(_VOUCHED) >= _CACHE_LIMIT:
        _VOUCHED.clear()
    _VOUCHED.add(_record_key(record, credentials))
    return True


def check(record: TaskRecord, credentials: Credentials, *, queue: bool = False) -> Refusal | None:
    """None if ``record``'s seal is one its readers accept (see the module), else why not."""
    if initial(record):
        return None
    raw = record.data.get(SEAL_FIELD)
    if raw is None:
        return Refusal(UNSEALED, "the record carries no seal")
    try:
        seal = Signature.model_validate(raw)
    except ValidationError:
        return Refusal(UNSEALED, "the record's seal is not a signature")
    key = (record.team, record.task_id, record.version, seal.sig, credentials.lead_fingerprint)
    if key in _SEALED:
        return None
    # a running record's seal is, as a rule, the one of the record just before it (its
    # start was made from that, and no member signs its start): that is tried first, as
    # each failed try is a whole signature check; the same seals are accepted either way
    nearest = started(record, queue, back=1) if record.state == "running" else []
    signer = _signer_among(nearest, seal, credentials, queue)
    if signer is None:
        try:
            signer = credentials.verify(
                SEAL, seal_body(After.of(record)), seal, by=_sealers(record, queue)
            )
        except SignatureRefused as exc:
            farther = started(record, queue)[len(nearest) :]
            signer = _signer_among(farther, seal, credentials, queue)
            if signer is None:
                return Refusal(seal.by, str(exc))
    if signer != LEAD and not queue:
        refused = _granted(record, signer, credentials)
        if refused:
            return Refusal(signer, refused)
    _remember(key)
    return None


STARTS = 8
"""How many starts in a row a record's seal may lie behind (a member started again after
a restart, or in queue mode one taker after another whose holder died)."""


def started(record: TaskRecord, queue: bool, *, back: int = STARTS) -> list[After]:
    """The records a member's start of ``record``'s attempt (or the undoing of one: a
    member that stopped, or refused what it began) could have been made from, up to
    ``back`` (at most ``STARTS``) versions before, nearest first: ``queued`` or
    ``running`` with the record's assignee (in queue mode also with none: the taker
    named itself, or gave the task back)."""
    if record.state not in ("queued", "running"):
        return []
    found = []
    for behind in range(1, min(back, STARTS, record.version - 1) + 1):
        queued = replace(After.of(record), state="queued", version=record.version - behind)
        # in queue mode the enqueuer seals a task nobody holds: that record comes first
        found += [replace(queued, assignee=None), queued] if queue else [queued]
        found.append(replace(queued, state="running"))
    return found


def _signer_among(
    candidates: list[After], seal: Signature, credentials: Credentials, queue: bool
) -> str | None:
    """Who sealed the one of ``candidates`` (records ``record``'s start could have been
    made from) that ``seal`` is a seal of, if any."""
    for before in candidates:
        try:
            return credentials.verify(SEAL, seal_body(before), seal, by=_sealers_of(before, queue))
        except SignatureRefused:
            continue
    return None


def _sealers_of(before: After, queue: bool) -> Iterable[str]:
    if queue:
        return (ANYONE,)
    if before.state == "running" and before.assignee:
        return (LEAD, before.assignee)
    return (LEAD,)


def by_previous_lead(record: TaskRecord, credentials: Credentials) -> bool:
    """True if the record was sealed under the lead key the last rotation replaced: as
    registered, by that key (itself, or the record its member's start was made from), or
    (``running``) by its assignee under that key's grant."""
    if initial(record):
        return True
    try:
        seal = Signature.model_validate(record.data.get(SEAL_FIELD))
    except ValidationError:
        return False
    body = seal_body(After.of(record))
    if credentials.by_previous_lead(SEAL, body, seal):
        return True
    if any(  # a member's start of a record that key sealed (``started``)
        credentials.by_previous_lead(SEAL, seal_body(before), seal)
        for before in started(record, queue=False)
        if seal.by == LEAD
    ):
        return True
    if record.state != "running" or not record.assignee or seal.by != record.assignee:
        return False
    try:
        credentials.verify(SEAL, body, seal, by=record.assignee)
        grant = Grant.model_validate(record.data.get("grant"))
    except (SignatureRefused, ValidationError):
        return False
    return credentials.by_previous_lead(SEAL, _granted_body(record, grant), grant.seal)


def _sealers(record: TaskRecord, queue: bool) -> Iterable[str]:
    if queue:
        return (ANYONE,)
    if record.state == "running" and record.assignee:
        return (LEAD, record.assignee)
    return (LEAD,)


def _granted(record: TaskRecord, member: str, credentials: Credentials) -> str | None:
    """None if the lead's seal the record carries as its grant assigned the record's
    attempt to ``member``, else why not."""
    try:
        grant = Grant.model_validate(record.data.get("grant"))
    except ValidationError:
        return f"{member} sealed it, but carries no grant of attempt {record.attempt}"
    key = (record.team, record.task_id, grant.version, grant.seal.sig, credentials.lead_fingerprint)
    if key in _SEALED:
        return None  # the lead's own seal, made or verified here
    try:
        credentials.verify(SEAL, _granted_body(record, grant), grant.seal, by=LEAD)
    except SignatureRefused:
        return f"{member} sealed it, but attempt {record.attempt} was not granted to {member}"
    _remember(key)
    return None


def forget() -> None:
    """Forget every check this process remembers: the next read verifies anew (what
    a new process would do; tests use it to play one)."""
    _SEALED.clear()
    _VOUCHED.clear()


def _remember(key: _SealKey) -> None:
    if len(_SEALED) >= _CACHE_LIMIT:
        _SEALED.clear()
    _SEALED.add(key)
