"""Task envelopes (what a follower is asked to do) and results (what it returns)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tenure.protocol.errors import ProtocolError
from tenure.protocol.ids import check_task_id
from tenure.protocol.limits import check_text

JsonObject = dict[str, Any]
ResultStatus = Literal["completed", "blocked", "refused", "failed"]
MAX_EPOCH = 2**53 - 1  # exact in every backend (Redis' Lua numbers are doubles)
MAX_EPOCH_JUMP = 1_000_000  # how far above the team's counter a member's report may lift a claim
_ATTEMPT = re.compile(r"[1-9][0-9]*")
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


class Strict(BaseModel):
    """Base of every protocol model: unknown fields are errors, values are immutable.

    Float fields refuse NaN and infinity: an infinite TTL or deadline would never expire.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )


def check_json_schema(value: JsonObject) -> JsonObject:
    """Refuse a schema that is itself invalid when the plan loads, not after the work.
    (``jsonschema`` is imported here, on the first schema: a member whose tasks carry
    none never loads it, some 10 MB.)"""
    import jsonschema

    dialect = value.get("$schema")
    if dialect is not None and not isinstance(dialect, str):
        raise ValueError(f"a valid JSON Schema; $schema must be a URI string, got {dialect!r}")
    try:
        validator = jsonschema.validators.validator_for(
            value, default=jsonschema.Draft202012Validator
        )
        validator.check_schema(value)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ValueError(f"a valid JSON Schema; at {where}: {exc.message}") from None
    return value


# --- checks: machine-run acceptance, weakest first -------------------------------------


class SchemaCheck(Strict):
    """The artifact must validate against a JSON Schema."""

    kind: Literal["schema"] = "schema"
    json_schema: JsonObject = Field(alias="schema")

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: JsonObject) -> JsonObject:
        return check_json_schema(value)


class EvidenceCheck(Strict):
    """Every value carries a source no older than ``max_age_seconds``; unknowns are null."""

    kind: Literal["evidence"] = "evidence"
    max_age_seconds: float | None = Field(default=None, gt=0)
    fields: list[str] | None = None


class CommandCheck(Strict):
    """The verifier runs ``run`` itself and checks its exit code (and output)."""

    kind: Literal["command"] = "command"
    run: str = Field(min_length=1)
    expect_exit: int = 0
    expect_output: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)

    @field_validator("expect_output")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"a valid regular expression ({exc})") from None
        return value


class JudgeCheck(Strict):
    """A model grades the artifact against the criteria in a fresh context."""

    kind: Literal["judge"] = "judge"
    model: str | None = None
    pass_threshold: float = Field(default=0.5, ge=0, le=1)


class QuorumCheck(Strict):
    """``k`` of ``n`` independent executions, on ``n`` distinct workers, must agree.

    ``wait_seconds``: how long a voter may wait for a worker no other voter of its
    round went to, while the team has too few; then the task goes to a person."""

    kind: Literal["quorum"] = "quorum"
    k: int = Field(ge=1)
    n: int = Field(ge=1)
    comparator: Literal["exact", "json"] = "exact"
    decision: str | None = Field(default=None, min_length=1)
    wait_seconds: float = Field(default=60.0, ge=0, le=86_400)

    @model_validator(mode="after")
    def _k_within_n(self) -> QuorumCheck:
        if self.k > self.n:
            raise ProtocolError("k", f"at most n ({self.n}); got k = {self.k}")
        return self


Check = Annotated[
    SchemaCheck | EvidenceCheck | CommandCheck | JudgeCheck | QuorumCheck,
    Field(discriminator="kind"),
]


# --- signatures -----------------------------------------------------------------------


class Signature(Strict):
    """Who signed a body (``lead``, or a member id) and the Ed25519 signature, base64.

    It covers the body without this field, with the team path, as canonical JSON
    (``tenure.protocol.signing``); a receiver verifies it before acting."""

    by: str = Field(min_length=1, max_length=128)
    sig: str = Field(min_length=1, max_length=200)


# --- budgets and spend ----------------------------------------------------------------


class Budget(Strict):
    """Limits on model work for one task or a whole team; a limit left out is unlimited.

    In an envelope it is what remains for that attempt (the leader subtracts what the
    task and the team have spent already)."""

    tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    wall_seconds: float | None = Field(default=None, ge=0)


class Spend(Strict):
    """What model work cost: tokens in and out, money, calls, and the model that did it.

    ``unpriced`` counts calls to a model the price table does not know (costed at 0)."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    calls: int = Field(default=0, ge=0)
    unpriced: int = Field(default=0, ge=0)
    model: str | None = None


# --- the envelope -------------------------------------------------------------------


class PriorAttempt(Strict):
    """What went wrong in an earlier attempt, carried forward so it is not repeated."""

    attempt: int = Field(ge=1)
    status: str
    failure: str


class TaskEnvelope(Strict):
    """Everything a follower needs to do one attempt of one task, and nothing it must guess."""

    task_id: str
    idempotency_key: str
    epoch: int = Field(ge=1, le=MAX_EPOCH)
    attempt: int = Field(ge=1)
    assigned_to: str = Field(min_length=1)
    deadline_seconds: float = Field(gt=0)
    goal: str = Field(min_length=1)
    acceptance_criteria: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    input: JsonObject = Field(default_factory=dict)
    scope: list[str] = Field(default_factory=list)
    depends_on: list[str] = Field(default_factory=list)
    reply_to: str = "leader"
    history: list[PriorAttempt] = Field(default_factory=list)
    output_schema: JsonObject | None = None
    executor: str | None = None
    budget: Budget | None = None
    traceparent: str | None = None  # the sender's span (W3C Trace Context): parenting only
    signature: Signature | None = None  # the team's leadership's (``by: lead``)

    @field_validator("traceparent")
    @classmethod
    def _w3c_traceparent(cls, value: str | None) -> str | None:
        return None if value is None else check_traceparent(value)

    @field_validator("output_schema")
    @classmethod
    def _valid_output_schema(cls, value: JsonObject | None) -> JsonObject | None:
        return None if value is None else check_json_schema(value)

    @field_validator("task_id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return check_task_id(value)

    @field_validator("goal")
    @classmethod
    def _goal_size(cls, value: str) -> str:
        return check_text(value, "goal")

    @model_validator(mode="after")
    def _key_matches_attempt(self) -> TaskEnvelope:
        check_key(self.task_id, self.idempotency_key, self.attempt)
        return self


def check_traceparent(value: str, field: str = "traceparent") -> str:
    """Refuse anything but a W3C Trace Context ``traceparent`` of version 00: it only
    ever names a span of the run's trace to parent the receiver's spans."""
    if not _TRACEPARENT.fullmatch(value):
        raise ProtocolError(
            field,
            "a W3C traceparent, 00-<32 hex trace id>-<16 hex span id>-<2 hex flags> "
            f"in lowercase, ids not all zero; got {value[:60]!r}",
        )
    return value


def idempotency_key(task_id: str, attempt: int) -> str:
    """The key of one attempt: redelivery reuses it, a new attempt gets a new one."""
    return f"{task_id}:attempt-{attempt}"


def check_key(task_id: str, key: str, attempt: int | None = None) -> str:
    """Refuse a key that is not ``<task_id>:attempt-<n>`` (with ``n == attempt`` if given)."""
    if attempt is not None:
        expected = idempotency_key(task_id, attempt)
        if key != expected:
            raise ProtocolError("idempotency_key", f"{expected!r}; got {key[:60]!r}")
        return key
    prefix = f"{task_id}:attempt-"
    number = key.removeprefix(prefix)
    if not key.startswith(prefix) or not _ATTEMPT.fullmatch(number):
        raise ProtocolError(
            "idempotency_key", f"'{task_id}:attempt-<n>' with n >= 1; got {key[:60]!r}"
        )
    return key


# --- the result ---------------------------------------------------------------------


class Notes(Strict):
    changed: list[str] = Field(default_factory=list)
    verified: list[str] = Field(default_factory=list)
    uncertain: list[str] = Field(default_factory=list)


class CommandEvidence(Strict):
    """A command the worker ran, with what it printed and how it exited."""

    kind: Literal["command"] = "command"
    command: str
    exit_code: int
    output: str = ""


class SourceEvidence(Strict):
    """Where a value came from and when it was retrieved."""

    kind: Literal["source"] = "source"
    source: str = Field(min_length=1)
    retrieved_at: datetime
    field: str | None = None


Evidence = Annotated[CommandEvidence | SourceEvidence, Field(discriminator="kind")]


class Grounding(Strict):
    """An input the answer rests on, with the time it was read."""

    input: str
    at: datetime


class TaskResult(Strict):
    """What a follower returns for one attempt."""

    task_id: str
    idempotency_key: str
    epoch: int = Field(ge=1, le=MAX_EPOCH)
    status: ResultStatus
    artifact: Any = None
    notes: Notes = Field(default_factory=Notes)
    evidence: list[Evidence] = Field(default_factory=list)
    question: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    grounding: list[Grounding] = Field(default_factory=list)
    usage: Spend | None = None
    signature: Signature | None = None  # the member that made it (``by: <member id>``)

    @field_validator("task_id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return check_task_id(value)

    @model_validator(mode="after")
    def _well_formed(self) -> TaskResult:
        check_key(self.task_id, self.idempotency_key)
        if self.status == "blocked" and not self.question:
            raise ProtocolError("question", "a question when status is 'blocked'")
        return self
