"""The policies as objects: inspectable, and each one's edge cases decided as documented."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenure.verify import (
    AuthorityPolicy,
    Candidate,
    Chain,
    ConfidencePolicy,
    DecisionContext,
    FreshestPolicy,
    HumanPolicy,
    JudgePolicy,
    QuorumPolicy,
    build_policy,
    describe_policies,
    policy_for,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CTX = DecisionContext(decision="price", criteria=["the right price"])


def cand(ref: str, answer: Any, **fields: Any) -> Candidate:
    return Candidate(ref, answer, **fields)


def test_policies_are_built_from_plan_specs_and_describe_themselves() -> None:
    chain = build_policy({"chain": ["freshest", {"quorum": {"k": 2}}, "human"]})
    assert isinstance(chain, Chain)
    assert [type(s) for s in chain.steps] == [FreshestPolicy, QuorumPolicy, HumanPolicy]
    assert "freshest -> quorum -> human" in chain.describe()
    assert "k" in repr(chain.steps[1])
    assert "REFUSES" in build_policy("confidence").describe()
    assert "declared calibrated" in build_policy({"confidence": {"calibrated": True}}).describe()
    assert isinstance(build_policy({"judge": {"model": "openai:gpt-4.1"}}), JudgePolicy)
    described = describe_policies({"price": "freshest", "default": "human"})
    assert set(described) == {"price", "default"}
    assert described["default"].startswith("human")


def test_policy_for_looks_up_the_decision_then_the_task_then_default() -> None:
    policies = {"price": "freshest", "t1": "human", "default": {"quorum": {"k": 2}}}
    assert policy_for(policies, "price", "t1") is not None
    found = policy_for(policies, "price", "t1")
    assert found is not None and found[0] == "price"
    found = policy_for(policies, None, "t1")
    assert found is not None and found[0] == "t1"
    found = policy_for(policies, "other", "t9")
    assert found is not None and found[0] == "default"
    assert policy_for({}, "price", "t1") is None


def test_freshest_needs_a_real_gap() -> None:
    a = cand("a", 1, grounded_at=NOW)
    b = cand("b", 2, grounded_at=NOW + timedelta(seconds=30))
    assert FreshestPolicy().decide([a, b], CTX).winner == "b"
    from tenure.protocol.policy import FreshestParams

    strict = FreshestPolicy(FreshestParams(min_gap_seconds=60))
    assert strict.decide([a, b], CTX).winner is None
    same = cand("c", 3, grounded_at=NOW)
    assert FreshestPolicy().decide([a, same], CTX).winner is None
    blind = FreshestPolicy().decide([cand("x", 1), cand("y", 2)], CTX)
    assert blind.abstained


def test_freshest_ignores_grounding_dated_in_the_future() -> None:
    now = datetime.now(UTC)
    honest = cand("honest", 1, grounded_at=now - timedelta(minutes=1))
    forged = cand("forged", 2, grounded_at=now + timedelta(days=1))
    decided = FreshestPolicy().decide([honest, forged], CTX)
    assert decided.winner == "honest"
    assert "grounding dated in the future ignored: forged" in decided.reason
    alone = FreshestPolicy().decide([forged], CTX)
    assert alone.abstained and "forged" in alone.reason
    skewed = cand("skewed", 3, grounded_at=now + timedelta(minutes=2))  # within the allowance
    assert FreshestPolicy().decide([honest, skewed], CTX).winner == "skewed"


def test_confidence_needs_calibration_every_score_and_a_margin() -> None:
    from tenure.protocol.policy import ConfidenceParams

    a = cand("a", 1, confidence=0.8)
    b = cand("b", 2, confidence=0.75)
    assert ConfidencePolicy().decide([a, b], CTX).abstained
    calibrated = ConfidencePolicy(ConfidenceParams(calibrated=True))
    assert calibrated.decide([a, b], CTX).winner == "a"
    wide = ConfidencePolicy(ConfidenceParams(calibrated=True, margin=0.1))
    assert wide.decide([a, b], CTX).winner is None
    missing = calibrated.decide([a, cand("c", 3)], CTX)
    assert missing.abstained and "c" in missing.reason


def test_authority_takes_the_strongest_role_present_and_refuses_a_split_role() -> None:
    from tenure.protocol.policy import AuthorityParams

    policy = AuthorityPolicy(AuthorityParams(roles=["tester", "coder"]))
    coder = cand("coder", "done", roles=("coder",))
    tester = cand("tester", "3 tests fail", roles=("tester",))
    assert policy.decide([coder, tester], CTX).winner == "tester"
    assert policy.decide([coder, cand("other", "x")], CTX).winner == "coder"
    split = policy.decide([tester, cand("t2", "all pass", roles=("tester",))], CTX)
    assert split.winner is None and "backs different answers" in split.reason
    assert policy.decide([cand("a", 1), cand("b", 2)], CTX).abstained


def test_quorum_counts_agreeing_answers_and_refuses_an_even_split() -> None:
    from tenure.protocol.policy import QuorumParams

    policy = QuorumPolicy(QuorumParams(k=2))
    votes = [cand("a", 1), cand("b", 1), cand("c", 2)]
    assert policy.decide(votes, CTX).winner == "a"
    even = policy.decide([cand("a", 1), cand("b", 1), cand("c", 2), cand("d", 2)], CTX)
    assert even.winner is None and "two answers" in even.reason
    shared = policy.decide([cand("a", 1, model="p:m"), cand("b", 1, model="p:m")], CTX)
    assert shared.winner == "a"
    assert any("share the model p:m" in w for w in shared.warnings)


def test_a_chain_skips_abstentions_cross_checks_and_escalates_when_nothing_decides() -> None:
    a = cand("a", 1, grounded_at=NOW, confidence=0.9)
    b = cand("b", 2, grounded_at=NOW + timedelta(minutes=5), confidence=0.2)
    skip = build_policy({"chain": ["confidence", "freshest", "human"]})
    decided = skip.decide([a, b], CTX)
    assert decided.winner == "b"
    assert [s.outcome for s in decided.steps] == ["abstained", "winner"]
    disagree = build_policy({"chain": ["freshest", {"confidence": {"calibrated": True}}]})
    escalated = disagree.decide([a, b], CTX)
    assert escalated.escalate and escalated.winner is None
    nothing = build_policy({"chain": ["confidence", {"quorum": {"k": 2}}]}).decide([a, b], CTX)
    assert nothing.escalate
    assert "no policy in the chain decided" in nothing.reason


def test_policies_that_pick_the_same_answer_through_different_voters_agree() -> None:
    a1 = cand("a1", {"p": 1}, confidence=0.9)
    a2 = cand("a2", {"p": 1}, grounded_at=NOW + timedelta(hours=1))
    b = cand("b", {"p": 2}, grounded_at=NOW, confidence=0.1)
    chain = build_policy({"chain": ["freshest", {"confidence": {"calibrated": True}}]})
    decision = chain.decide([a1, a2, b], CTX)
    assert not decision.escalate
    assert decision.winner == "a2"
    assert "confidence agree" in decision.reason


def test_human_always_escalates_with_the_answers_in_the_question() -> None:
    decision = build_policy({"human": {"question": "which price holds?"}}).decide(
        [cand("a", 1), cand("b", 2)], CTX
    )
    assert decision.escalate
    assert decision.reason.startswith("which price holds?")


@pytest.mark.parametrize("spec", ["freshest", "confidence", "judge", {"quorum": {"k": 1}}])
def test_one_answer_backed_by_everyone_is_never_escalated(spec: Any) -> None:
    votes = [cand("a", 1, confidence=0.5, grounded_at=NOW), cand("b", 1, confidence=0.5)]
    decision = build_policy(spec).decide(votes, CTX)
    assert not decision.escalate
