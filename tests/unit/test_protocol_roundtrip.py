"""Every protocol model survives ``to_json`` then parsing, unchanged.

The strategies build only valid values: safe ids, keys that match their
attempt, header and body epochs that agree, k <= n in quorum checks.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from ulid import ULID

from tenure.protocol import (
    FENCED_TYPES,
    MESSAGE_CLASSES,
    MESSAGE_TYPES,
    Budget,
    CommandCheck,
    CommandEvidence,
    EvidenceCheck,
    Grounding,
    JudgeCheck,
    Notes,
    Plan,
    PlanTask,
    PriorAttempt,
    QuorumCheck,
    SchemaCheck,
    SourceEvidence,
    Spend,
    TaskEnvelope,
    TaskResult,
    idempotency_key,
    parse_envelope,
    parse_message,
    parse_plan,
    parse_result,
    to_dict,
    to_json,
)
from tenure.protocol.messages import (
    EscalationAnswer,
    EscalationAsk,
    LeadershipClaim,
    LeadershipHeartbeat,
    LeadershipRelease,
    MemberHeartbeat,
    MemberJoin,
    MemberLeave,
    PlanUpdate,
    TaskCancel,
    TaskProgress,
)
from tenure.protocol.plan import MAX_DEADLINE_SECONDS

SETTINGS = settings(max_examples=50, deadline=None)

# --- leaves ---------------------------------------------------------------------------

ulids = st.binary(min_size=16, max_size=16).map(lambda raw: str(ULID.from_bytes(raw)))
task_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True).filter(
    lambda value: ".." not in value
)
teams = st.lists(task_ids, min_size=1, max_size=3).map("/".join)
names = st.text(min_size=1, max_size=20)
texts = st.text(max_size=40)
epochs = st.integers(min_value=1, max_value=2**40)
attempts = st.integers(min_value=1, max_value=20)
positive = st.floats(min_value=0.001, max_value=1e6, allow_nan=False, allow_infinity=False)
deadlines = st.floats(min_value=0.001, max_value=MAX_DEADLINE_SECONDS, allow_nan=False)
unit = st.floats(min_value=0, max_value=1, allow_nan=False)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(texts, json_values, max_size=4)
# Schemas must themselves be valid JSON Schemas (refused at load otherwise).
json_schemas = st.sampled_from(
    [
        {},
        {"type": "object"},
        {"type": "object", "required": ["price"], "properties": {"price": {"type": "number"}}},
        {"type": ["string", "null"], "maxLength": 40},
        {"type": "array", "items": {"type": "integer", "minimum": 0}},
    ]
)
lists_of_text = st.lists(texts, max_size=3)

# --- checks and evidence ----------------------------------------------------------------

schema_checks = json_schemas.map(lambda schema: SchemaCheck(json_schema=schema))
evidence_checks = st.builds(
    EvidenceCheck,
    max_age_seconds=st.none() | positive,
    fields=st.none() | lists_of_text,
)
command_checks = st.builds(
    CommandCheck,
    run=names,
    expect_exit=st.integers(min_value=-255, max_value=255),
    expect_output=st.none() | st.sampled_from(["ok", "^passed", r"\d+ tests? passed", "[a-z]+"]),
    timeout_seconds=positive,
)
judge_checks = st.builds(JudgeCheck, model=st.none() | names, pass_threshold=unit)


@st.composite
def quorum_checks(draw: st.DrawFn) -> QuorumCheck:
    n = draw(st.integers(min_value=1, max_value=9))
    k = draw(st.integers(min_value=1, max_value=n))
    return QuorumCheck(
        k=k,
        n=n,
        comparator=draw(st.sampled_from(["exact", "json"])),
        decision=draw(st.none() | names),
    )


checks = st.one_of(schema_checks, evidence_checks, command_checks, judge_checks, quorum_checks())

# tie-break policy specs (tenure.protocol.policy): a name, {name: params} or a chain
_one_policy = st.one_of(
    st.sampled_from(["freshest", "human", "judge", "confidence"]),
    st.builds(lambda k: {"quorum": {"k": k}}, st.integers(min_value=1, max_value=9)),
    st.builds(
        lambda roles: {"authority": {"roles": roles}}, st.lists(names, min_size=1, max_size=3)
    ),
    st.builds(lambda c: {"confidence": {"calibrated": c}}, st.booleans()),
    st.builds(lambda m: {"judge": {"model": m}}, st.none() | names),
)
policy_specs = _one_policy | st.builds(
    lambda steps, human: {"chain": [*steps, *(["human"] if human else [])]},
    st.lists(_one_policy.filter(lambda p: p != "human"), min_size=1, max_size=3),
    st.booleans(),
)
policy_maps = st.dictionaries(names.filter(str.strip), policy_specs, max_size=3)
evidence = st.one_of(
    st.builds(
        CommandEvidence,
        command=texts,
        exit_code=st.integers(min_value=-255, max_value=255),
        output=texts,
    ),
    st.builds(SourceEvidence, source=names, retrieved_at=times, field=st.none() | texts),
)

budgets = st.builds(
    Budget,
    tokens=st.none() | st.integers(min_value=0, max_value=10**9),
    cost_usd=st.none() | st.floats(min_value=0, max_value=1e6),
    wall_seconds=st.none() | st.floats(min_value=0, max_value=1e6),
)
spends = st.builds(
    Spend,
    input_tokens=st.integers(min_value=0, max_value=10**9),
    output_tokens=st.integers(min_value=0, max_value=10**9),
    cost_usd=st.floats(min_value=0, max_value=1e6),
    calls=st.integers(min_value=0, max_value=10**6),
    unpriced=st.integers(min_value=0, max_value=10**6),
    model=st.none() | names,
)

# --- envelope, result, plan -------------------------------------------------------------


@st.composite
def envelopes(draw: st.DrawFn, epoch: int | None = None) -> TaskEnvelope:
    task_id = draw(task_ids)
    attempt = draw(attempts)
    return TaskEnvelope(
        task_id=task_id,
        idempotency_key=idempotency_key(task_id, attempt),
        epoch=draw(epochs) if epoch is None else epoch,
        attempt=attempt,
        assigned_to=draw(names),
        deadline_seconds=draw(positive),
        goal=draw(names),
        acceptance_criteria=draw(lists_of_text),
        checks=draw(st.lists(checks, max_size=3)),
        input=draw(json_objects),
        scope=draw(lists_of_text),
        depends_on=draw(st.lists(task_ids, max_size=3)),
        reply_to=draw(names),
        history=draw(
            st.lists(st.builds(PriorAttempt, attempt=attempts, status=texts, failure=texts))
        ),
        output_schema=draw(st.none() | json_schemas),
        executor=draw(st.none() | names),
        budget=draw(st.none() | budgets),
    )


@st.composite
def results(draw: st.DrawFn, epoch: int | None = None) -> TaskResult:
    task_id = draw(task_ids)
    status = draw(st.sampled_from(["completed", "blocked", "refused", "failed"]))
    question = draw(names) if status == "blocked" else draw(st.none() | texts)
    return TaskResult(
        task_id=task_id,
        idempotency_key=idempotency_key(task_id, draw(attempts)),
        epoch=draw(epochs) if epoch is None else epoch,
        status=status,
        artifact=draw(json_values),
        notes=draw(
            st.builds(Notes, changed=lists_of_text, verified=lists_of_text, uncertain=lists_of_text)
        ),
        evidence=draw(st.lists(evidence, max_size=3)),
        question=question,
        confidence=draw(st.none() | unit),
        grounding=draw(st.lists(st.builds(Grounding, input=texts, at=times), max_size=3)),
        usage=draw(st.none() | spends),
    )


@st.composite
def plan_tasks(draw: st.DrawFn) -> list[PlanTask]:
    """Tasks with unique ids, each depending only on earlier ones (so never a cycle)."""
    ids = draw(st.lists(task_ids, min_size=1, max_size=6, unique=True))
    tasks = []
    for index, task_id in enumerate(ids):
        tasks.append(
            PlanTask(
                id=task_id,
                goal=draw(names),
                acceptance_criteria=draw(lists_of_text),
                checks=draw(st.lists(checks, max_size=2)),
                depends_on=draw(st.lists(st.sampled_from(ids[:index]), unique=True))
                if index
                else [],
                scope=draw(lists_of_text),
                capability=draw(st.none() | names),
                deadline_seconds=draw(deadlines),
                input=draw(json_objects),
                output_schema=draw(st.none() | json_schemas),
                max_attempts=draw(st.none() | st.integers(min_value=1, max_value=20)),
                executor=draw(st.none() | names),
                budget=draw(st.none() | budgets),
            )
        )
    return tasks


plans = st.builds(
    Plan,
    team=teams,
    goal=texts,
    max_attempts=st.integers(min_value=1, max_value=20),
    tasks=plan_tasks(),
    policies=policy_maps,
    budget=st.none() | budgets,
    planning_spend=st.none() | spends,
)

# --- bodies, one strategy per message type ---------------------------------------------


@st.composite
def progress(draw: st.DrawFn) -> TaskProgress:
    task_id = draw(task_ids)
    attempt = draw(attempts)
    return TaskProgress(
        task_id=task_id,
        idempotency_key=idempotency_key(task_id, attempt),
        attempt=attempt,
        message=draw(texts),
        acceptance_criteria=draw(lists_of_text),
        fraction_done=draw(st.none() | unit),
    )


def body_for(kind: str, epoch: int) -> st.SearchStrategy[Any]:
    priority = st.integers(min_value=-1000, max_value=1000)
    seen = st.integers(min_value=0, max_value=2**40)
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "leadership.claim": st.builds(
            LeadershipClaim, holder=names, ttl_seconds=positive, priority=priority
        ),
        "leadership.heartbeat": st.builds(LeadershipHeartbeat, holder=names, ttl_seconds=positive),
        "leadership.release": st.builds(LeadershipRelease, holder=names, reason=texts),
        "member.join": st.builds(
            MemberJoin,
            member=names,
            priority=priority,
            capabilities=lists_of_text,
            highest_epoch=seen,
        ),
        "member.heartbeat": st.builds(
            MemberHeartbeat, member=names, highest_epoch=seen, running=st.lists(task_ids)
        ),
        "member.leave": st.builds(MemberLeave, member=names, reason=texts),
        "task.assign": envelopes(epoch=epoch),
        "task.progress": progress(),
        "task.result": results(epoch=epoch),
        "task.cancel": st.builds(TaskCancel, task_id=task_ids, reason=names),
        "escalation.ask": st.builds(
            EscalationAsk, task_id=task_ids, question=names, options=lists_of_text
        ),
        "escalation.answer": st.builds(
            EscalationAnswer, task_id=task_ids, answer=names, answered_by=texts
        ),
        "plan.update": st.builds(
            PlanUpdate,
            revision=st.integers(min_value=1, max_value=10**6),
            reason=texts,
            tasks=plan_tasks(),
        ),
    }
    return strategies[kind]


def test_every_message_type_has_a_body_strategy() -> None:
    for kind in MESSAGE_TYPES:
        assert body_for(kind, 1) is not None


@st.composite
def messages(draw: st.DrawFn, kind: str) -> Any:
    fenced = kind in FENCED_TYPES
    epoch = draw(epochs) if fenced else draw(st.none() | epochs)
    header = {
        "id": draw(ulids),
        "team": draw(teams),
        "from": draw(names),
        "to": draw(names),
        "epoch": epoch,
        "ts": draw(times),
    }
    body = draw(body_for(kind, epoch or 1))
    return MESSAGE_CLASSES[kind].model_validate({**header, "body": body})


any_message = st.sampled_from(MESSAGE_TYPES).flatmap(messages)


# --- the properties ---------------------------------------------------------------------


def same(parsed: BaseModel, original: BaseModel) -> None:
    assert type(parsed) is type(original)
    assert parsed == original
    assert to_json(parsed) == to_json(original)


@SETTINGS
@given(any_message)
def test_every_message_round_trips_through_json_text(message: Any) -> None:
    same(parse_message(to_json(message)), message)


@SETTINGS
@given(any_message)
def test_every_message_round_trips_through_bytes_and_dicts(message: Any) -> None:
    same(parse_message(to_json(message).encode("utf-8")), message)
    same(parse_message(to_dict(message)), message)
    same(parse_message(json.loads(json.dumps(to_dict(message)))), message)


@SETTINGS
@given(any_message)
def test_wire_form_uses_the_documented_header(message: Any) -> None:
    wire = json.loads(to_json(message))
    assert list(wire)[:2] == ["v", "id"]
    assert set(wire) == {"v", "id", "type", "team", "from", "to", "epoch", "ts", "body"}
    assert wire["v"] == 1
    if wire["type"] in FENCED_TYPES:
        assert isinstance(wire["epoch"], int)


def test_each_type_round_trips_at_least_once() -> None:
    """``sampled_from`` may skip a type in 50 examples; this test may not."""
    for kind in MESSAGE_TYPES:

        @settings(max_examples=5, deadline=None)
        @given(messages(kind))
        def check(message: Any) -> None:
            same(parse_message(to_json(message)), message)

        check()


@SETTINGS
@given(envelopes())
def test_envelope_round_trips(envelope: TaskEnvelope) -> None:
    same(parse_envelope(json.loads(to_json(envelope))), envelope)
    same(TaskEnvelope.model_validate_json(to_json(envelope)), envelope)


@SETTINGS
@given(results())
def test_result_round_trips(result: TaskResult) -> None:
    same(parse_result(json.loads(to_json(result))), result)
    same(TaskResult.model_validate_json(to_json(result)), result)


@SETTINGS
@given(plans)
def test_plan_round_trips_through_json_and_yaml(plan: Plan) -> None:
    import yaml

    same(parse_plan(to_json(plan)), plan)  # JSON is YAML
    same(parse_plan(yaml.safe_dump(to_dict(plan), sort_keys=False)), plan)


@SETTINGS
@given(plans)
def test_plan_round_trips_from_a_markdown_block(plan: Plan) -> None:
    import yaml

    text = (
        "# Plan\n\nSome prose first.\n\n```yaml\n"
        + yaml.safe_dump(to_dict(plan), sort_keys=False)
        + "```\n"
    )
    same(parse_plan(text, markdown=True), plan)
