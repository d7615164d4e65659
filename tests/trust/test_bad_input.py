"""Bad input to the trust layer: a clear error or a failed verification with the reason —
never a crash, never a silent pass."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tenure.models import ScriptedModel
from tenure.protocol import ProtocolError, SchemaCheck, TaskResult, parse_plan
from tenure.roles.register import read_task
from tenure.store import Store
from tenure.verify import Candidate, DecisionContext, Trust, build_policy, check_schema, verify

from .harness import TEAM, Crew, Recording, events, plan_of, states, task


def run_one(
    store: Store, tmp_path: Path, checks: list[dict[str, Any]], trust: Trust | None = None
) -> list[dict[str, Any]]:
    plan = plan_of(
        {"id": "t", "max_attempts": 2, "acceptance_criteria": ["is good"], "checks": checks}
    )
    crew = Crew(store, tmp_path, plan, trust=trust)
    crew.hire("w1", Recording(lambda env, ctx: {"answer": 42}))
    crew.run()
    assert states(store) == {"t": "blocked"}, "a broken check let the task through"
    verdicts = [e.data for e in events(store, "verify.verdict", "t")]
    assert len(verdicts) == 2, "each attempt is verified and logged"
    assert not any(v["passed"] for v in verdicts)
    return verdicts


def test_a_check_of_an_unknown_kind_is_refused_when_the_plan_loads() -> None:
    text = "team: t\ntasks:\n  - id: a\n    goal: g\n    checks: [{kind: vibes}]\n"
    with pytest.raises(ProtocolError) as caught:
        parse_plan(text)
    assert caught.value.field == "tasks[0].checks[0].kind"


def test_a_check_of_an_unknown_kind_in_the_register_fails_verification(
    store: Store, tmp_path: Path
) -> None:
    """A result under review whose task's checks the leader cannot read (a register
    written by another version): the reviewer neither crashes nor passes it."""
    crew = Crew(store, tmp_path, plan_of({"id": "other"}))
    epoch = crew.keeper.check()
    store.create_task(
        TEAM, "t", epoch=epoch, spec={"goal": "g", "max_attempts": 1, "checks": [{"kind": "vibes"}]}
    )
    record = store.transition(TEAM, "t", epoch=epoch, expect=["queued"], to="running", attempt=1)
    result = {"task_id": "t", "idempotency_key": "t:attempt-1", "epoch": epoch}
    record = store.transition(
        TEAM,
        "t",
        epoch=epoch,
        expect=["running"],
        to="review",
        version=record.version,
        result={**result, "status": "completed", "artifact": {"answer": 42}},
    )
    crew.conductor.reviewer.review(read_task(record))
    assert task(store, "t").state == "blocked"
    verdict = events(store, "verify.verdict", "t")[0].data
    assert not verdict["passed"]
    assert "checks are not valid" in verdict["reason"]
    assert "vibes" in verdict["reason"]


def test_a_command_that_does_not_exist_fails_with_command_not_found(
    store: Store, tmp_path: Path
) -> None:
    verdicts = run_one(store, tmp_path, [{"kind": "command", "run": "tenure-no-such-tool --ok"}])
    assert all("(command not found)" in v["reason"] for v in verdicts)
    assert "command not found" in task(store, "t").reason


def test_a_command_that_hangs_is_killed_and_fails_with_the_timeout(
    store: Store, tmp_path: Path
) -> None:
    run = f"{sys.executable} -c 'import time; time.sleep(30)'"
    verdicts = run_one(store, tmp_path, [{"kind": "command", "run": run, "timeout_seconds": 0.3}])
    assert all("timed out after 0.3s" in v["reason"] for v in verdicts)


def test_a_schema_that_is_itself_invalid_is_refused_or_fails_never_passes(
    store: Store, tmp_path: Path
) -> None:
    bad = {"type": "number", "minimum": "zero"}
    text = (
        "team: trust\ntasks:\n  - id: t\n    goal: g\n"
        "    checks: [{kind: schema, schema: {type: number, minimum: zero}}]\n"
    )
    try:
        parse_plan(text)
    except ProtocolError as exc:  # refused when the plan loads, naming the field
        assert exc.field.startswith("tasks[0].checks[0]")
    else:  # or accepted by the parser and failed by the verifier, with the reason
        verdicts = run_one(store, tmp_path, [{"kind": "schema", "schema": bad}])
        assert all("itself invalid" in v["reason"] for v in verdicts)
    check = SchemaCheck.model_construct(json_schema=bad)  # past any load-time check
    result = TaskResult.model_validate(
        {"task_id": "t", "idempotency_key": "t:attempt-1", "epoch": 1, "status": "completed"}
    )
    verdict = check_schema(check, result)
    assert not verdict.passed
    assert "itself invalid" in verdict.reason


def test_a_judge_with_unparseable_output_fails_verification(store: Store, tmp_path: Path) -> None:
    judge = ScriptedModel(["Honestly? Ship it. 10/10."])
    verdicts = run_one(store, tmp_path, [{"kind": "judge"}], Trust(judge=judge))
    assert all("not the JSON asked for" in v["reason"] for v in verdicts)
    assert "Ship it" in verdicts[0]["reason"]


def test_a_judge_model_that_cannot_be_opened_fails_verification(
    store: Store, tmp_path: Path
) -> None:
    verdicts = run_one(store, tmp_path, [{"kind": "judge", "model": "nosuch:model"}])
    assert all("could not run" in v["reason"] for v in verdicts)
    assert "unknown model provider 'nosuch'" in verdicts[0]["reason"]


def test_a_quorum_check_outside_the_runtime_fails_rather_than_passes() -> None:
    from tenure.protocol import QuorumCheck

    result = TaskResult.model_validate(
        {"task_id": "t", "idempotency_key": "t:attempt-1", "epoch": 1, "status": "completed"}
    )
    (verdict,) = verify([QuorumCheck(k=2, n=3)], result)
    assert not verdict.passed
    assert "3 independent executions" in verdict.reason


@pytest.mark.parametrize(
    ("policies", "field"),
    [
        ("{price: vibes}", "policies.price"),
        ("{price: {chain: []}}", "policies.price.chain"),
        ("{price: {chain: [freshest, {quorum: {k: 0}}]}}", "policies.price.chain[1].quorum.k"),
        ("{price: {chain: [human, freshest]}}", "policies.price.chain[1]"),
        ("{price: {chain: [{chain: [human]}]}}", "policies.price.chain[0]"),
        ("{price: {judge: {modle: x}}}", "policies.price.judge.modle"),
        ("{price: {authority: {}}}", "policies.price.authority.roles"),
        ("{price: {authority: {roles: []}}}", "policies.price.authority.roles"),
        ("{price: {confidence: {calibrated: maybe}}}", "policies.price.confidence.calibrated"),
        ("{price: {quorum: {k: 2, comparator: fuzzy}}}", "policies.price.quorum.comparator"),
        ("{price: {freshest: 3}}", "policies.price.freshest"),
        ("{price: {chain: [freshest], other: 1}}", "policies.price"),
        ("[freshest]", "policies"),
    ],
)
def test_a_bad_policy_is_refused_when_the_plan_loads_naming_the_field(
    policies: str, field: str
) -> None:
    text = f"team: t\npolicies: {policies}\ntasks: [{{id: a, goal: g}}]\n"
    with pytest.raises(ProtocolError) as caught:
        parse_plan(text)
    assert caught.value.field == field, str(caught.value)


def test_a_good_policy_map_loads_as_written() -> None:
    text = (
        "team: t\npolicies:\n"
        "  price: {chain: [freshest, {quorum: {k: 2}}, human]}\n"
        "  completion: {authority: {roles: [tester, coder]}}\n"
        "  default: human\n"
        "tasks: [{id: a, goal: g}]\n"
    )
    plan = parse_plan(text)
    assert plan.policies["price"] == {"chain": ["freshest", {"quorum": {"k": 2}}, "human"]}


def test_a_judge_policy_without_a_model_abstains_rather_than_picks() -> None:
    policy = build_policy("judge")
    a = Candidate("a:attempt-1", {"price": 1})
    b = Candidate("b:attempt-1", {"price": 2})
    decision = policy.decide([a, b], DecisionContext(criteria=["right"], trust=Trust()))
    assert decision.winner is None
    assert decision.abstained
    assert "no judge" in decision.reason
