"""What the register holds for a task, typed: its spec and its attempt data.

The store keeps both as JSON (``TaskRecord.spec`` and ``TaskRecord.data``); the
runtime reads them through these models, parsed once where the register is
read. Every default lives here, once. A key no model declares is refused and
named (a typo, or a record written by something that is not Tenure), never
carried along silently.

- ``TaskSpec``: the options a task was registered with — its plan entry
  (``PlanTask``) plus what its plan adds (the attempt limit resolved, the
  team's budget and tie-break policies) and what the runtime sets on tasks it
  registers itself (quorum voters, split parts).
- ``AttemptData``: what the runtime recorded about the task's attempts —
  failures carried into the next envelope, the operator's answers, spend,
  quorum rounds, nested-team hand-overs. Hooks keep their own state under
  ``hooks``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, field_validator

from tenure.protocol.codec import translate
from tenure.protocol.envelope import Budget, JsonObject, PriorAttempt, Signature, Spend, Strict
from tenure.protocol.errors import ProtocolError
from tenure.protocol.plan import DEFAULT_MAX_ATTEMPTS, Plan, PlanTask
from tenure.protocol.policy import check_policies

__all__ = [
    "SEAL_FIELD",
    "Answer",
    "AttemptData",
    "Grant",
    "QuorumOutcome",
    "QuorumState",
    "SpendEntry",
    "TaskSpec",
    "VoterOf",
    "parse_data",
    "parse_spec",
    "spec_for",
]


class TaskSpec(PlanTask):
    """A task as registered: immutable while it runs (a replan may replace it)."""

    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=20)
    team_budget: Budget | None = None  # the whole team's limits, on every task
    planning_spend: Spend | None = None  # what planning the plan cost
    policies: dict[str, Any] = Field(default_factory=dict)  # the team's tie-break policies
    replica_of: str | None = None  # a quorum voter: the task it votes for
    round: int | None = Field(default=None, ge=1)  # ... in this round
    voter: int | None = Field(default=None, ge=1)  # ... as voter number
    split_of: str | None = None  # a part of a task that was split
    signature: Signature | None = None  # the team's leadership's, over the rest

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_policies(value)

    @field_validator("max_attempts", mode="before")
    @classmethod
    def _default_attempts(cls, value: Any) -> Any:
        """A plan entry's ``null`` (the plan's default) is the default here too."""
        return DEFAULT_MAX_ATTEMPTS if value is None else value

    def plan_task(self) -> PlanTask:
        """The plan entry this spec was made from (what a planner splits)."""
        fields = {name: getattr(self, name) for name in PlanTask.model_fields}
        return PlanTask.model_validate(fields)

    def child_team(self, parent: str) -> str | None:
        """The nested team that runs this (composite) task, or None."""
        if self.team is None:
            return None
        return self.team.name or f"{parent}/{self.id}"


class Answer(Strict):
    """An operator's answer to a task that waited for one."""

    question: str = ""
    answer: str


class SpendEntry(Strict):
    """Spend of one attempt, or of work done for the task outside one (``kind``)."""

    attempt: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    calls: int = Field(default=0, ge=0)
    unpriced: int = Field(default=0, ge=0)
    seconds: float = Field(default=0.0, ge=0)
    model: str | None = None
    kind: str | None = None  # "split", "judge", ...; None: the attempt itself
    member: str | None = None  # the worker that ran the attempt
    abandoned: bool = False  # the leader gave up on the attempt before its result came
    awaiting: bool = False  # ... and its worker has not reported since (spend from its log)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class QuorumOutcome(Strict):
    """How a quorum round was counted (and, without ``k`` agreeing, tie-broken)."""

    voters: list[str] = Field(default_factory=list)
    decision: str | None = None
    passed: bool = False
    reason: str = ""
    winner: str | None = None
    policy: str | None = None
    warnings: list[str] = Field(default_factory=list)
    escalate: bool = False
    question: str | None = None


class QuorumState(Strict):
    """A quorum task's current round: its voters, and once counted, the outcome."""

    round: int = Field(ge=1)
    replicas: list[str] = Field(default_factory=list)
    outcome: QuorumOutcome | None = None


class VoterOf(Strict):
    """Who a quorum voter was dispatched to, and the roles it declared."""

    member: str
    roles: list[str] = Field(default_factory=list)


class ChildRecord(Strict):
    """A process an attempt's executor started, as the member recorded it: the next
    holder of the task kills its group if it outlived its member."""

    pid: int = Field(ge=1)
    pgid: int = Field(ge=1)
    host: str = Field(max_length=255)
    boot: str = Field(max_length=64)  # the host's boot id: a pid means nothing after a reboot
    started: int = Field(ge=0)  # start time in clock ticks after boot, tells a reused pid
    member: str = Field(max_length=200)
    attempt: int = Field(ge=0)
    mark: str = Field(default="", max_length=64)  # the execution's TENURE_RUN_MARK


CHILDREN_KEPT = 20
"""How many child records a task keeps (the newest)."""

SEAL_FIELD = "seal"
"""The attempt data's field that holds the seal: what its own digest leaves out."""


class Grant(Strict):
    """The leading role's last seal of a task's record, kept by the member that runs the
    attempt when it seals the record itself: the lead's word that this attempt is that
    member's. It names the record the lead sealed (its state, version and attempt data
    digest); the rest of that record is as it stands now."""

    state: str = Field(min_length=1, max_length=20)
    version: int = Field(ge=1)
    data: str = Field(min_length=1, max_length=100)  # digest of that record's attempt data
    seal: Signature


class AttemptData(Strict):
    """What the runtime knows about a task's attempts; empty for a new task."""

    dispatched_at: float | None = None  # store clock, when the current attempt went out
    dispatched_seq: int | None = Field(default=None, ge=0)  # the event log's last seq then
    history: list[PriorAttempt] = Field(default_factory=list)  # failures, oldest first
    qa: list[Answer] = Field(default_factory=list)  # the operator's answers
    attempt_base: int = Field(default=0, ge=0)  # attempts before the last answer
    question: str | None = None  # what the task asks while it waits for a person
    spend_log: list[SpendEntry] = Field(default_factory=list)
    split_into: list[str] = Field(default_factory=list)  # parts that do it instead
    quorum: QuorumState | None = None
    voter: VoterOf | None = None
    stand_in: str | None = None  # a nested team's stand-in sub-leader holds the attempt
    child_epoch: int | None = Field(default=None, ge=0)  # nested team's epoch at dispatch
    coding_state: str | None = None  # a coding run: the task's state in status.yml
    branch: str | None = None  # a coding run: the current attempt's branch
    qa_seen: int = Field(default=0, ge=0)  # a coding run: answers copied into the task file
    hooks: dict[str, JsonObject] = Field(default_factory=dict)  # a hook's own state, by name
    children: list[ChildRecord] = Field(default_factory=list, max_length=CHILDREN_KEPT)
    grant: Grant | None = None  # the lead's seal its assignee's own writes rest on
    seal: Signature | None = None  # the writer's, over the record after its write

    def with_(self, **changes: Any) -> AttemptData:
        """A copy with ``changes`` applied, validated like any data read from the register."""
        return AttemptData.model_validate({**self.model_dump(), **changes})

    def dump(self) -> JsonObject:
        """The JSON the register stores (defaults left out, so a new task's is ``{}``)."""
        return self.model_dump(mode="json", exclude_defaults=True)


def spec_for(plan: Plan, task: PlanTask) -> TaskSpec:
    """The spec a plan's task is registered with: the team's limits travel with it."""
    fields = task.model_dump(by_alias=True)
    fields["max_attempts"] = plan.attempts_for(task)
    if plan.budget is not None:
        fields["team_budget"] = plan.budget
    if plan.planning_spend is not None:
        fields["planning_spend"] = plan.planning_spend
    if plan.policies:
        fields["policies"] = plan.policies
    return TaskSpec.model_validate(fields)


def parse_spec(raw: Any, *, source: str) -> TaskSpec:
    """A register spec as a ``TaskSpec``; ``ProtocolError`` naming the key otherwise."""
    if not isinstance(raw, dict):
        raise ProtocolError("spec", "a JSON object", source=source)
    try:
        return TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise _translated(exc, "spec", source) from None


def parse_data(raw: Any, *, source: str) -> AttemptData:
    """Register data as ``AttemptData``; ``ProtocolError`` naming the key otherwise."""
    if not isinstance(raw, dict):
        raise ProtocolError("data", "a JSON object", source=source)
    try:
        return AttemptData.model_validate(raw)
    except ValidationError as exc:
        raise _translated(exc, "data", source) from None


def _translated(exc: ValidationError, where: str, source: str) -> ProtocolError:
    error = translate(exc)
    return ProtocolError(f"{where}.{error.field}", error.expected, source=source)
