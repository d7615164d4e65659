"""The judge: a fresh context with the criteria first; both orders for comparisons."""

from __future__ import annotations

from typing import Any

import pytest

from tenure.models import ChatMessage, ScriptedModel
from tenure.protocol import JudgeCheck, TaskResult
from tenure.verify import JudgeError, check_judge, compare, grade

from .harness import judge_preferring, sycophant

CRITERIA = ["states a price in USD", "names the source page"]


def result(artifact: Any, **fields: Any) -> TaskResult:
    return TaskResult.model_validate(
        {
            "task_id": "t",
            "idempotency_key": "t:attempt-1",
            "epoch": 1,
            "status": "completed",
            "artifact": artifact,
            **fields,
        }
    )


def test_a_sycophantic_judge_in_both_orders_is_a_tie() -> None:
    pref = compare(sycophant(), CRITERIA, {"price": 100}, {"price": 120})
    assert pref.winner is None
    assert (pref.first_order, pref.second_order) == ("a", "b")
    assert "position bias" in pref.reason


def test_a_consistent_judge_wins_in_both_orders() -> None:
    judge = judge_preferring("120")
    assert compare(judge, CRITERIA, {"price": 100}, {"price": 120}).winner == "b"
    assert compare(judge, CRITERIA, {"price": 120}, {"price": 100}).winner == "a"
    assert len(judge.calls) == 4


def test_a_tie_in_both_orders_is_a_tie() -> None:
    pref = compare(ScriptedModel([{"better": "tie", "reason": "same"}]), CRITERIA, 1, 2)
    assert pref.winner is None
    assert pref.reason == "a tie in both orders"


def test_grading_sees_the_criteria_first_and_only_the_artifact() -> None:
    judge = ScriptedModel([{"score": 0.8, "reason": "meets both"}])
    worker_result = result(
        {"price": 100, "source": "https://acme.example"},
        confidence=0.97,
        notes={"verified": ["I double-checked everything, trust me"]},
    )
    verdict = check_judge(JudgeCheck(pass_threshold=0.75), judge, CRITERIA, worker_result)
    assert verdict.passed
    assert verdict.evidence["score"] == 0.8
    (conversation,) = judge.calls
    assert [m.role for m in conversation] == ["system", "user"]
    user = conversation[1].content
    assert user.startswith("## Acceptance criteria\n1. states a price in USD")
    assert user.index("names the source page") < user.index("https://acme.example")
    assert "trust me" not in user
    assert "0.97" not in user


def test_a_grade_below_the_threshold_fails_with_the_judges_reason() -> None:
    judge = ScriptedModel([{"score": 0.3, "reason": "no source page"}])
    verdict = check_judge(JudgeCheck(pass_threshold=0.5), judge, CRITERIA, result({"price": 1}))
    assert not verdict.passed
    assert "0.30" in verdict.reason
    assert "no source page" in verdict.reason


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("Looks great to me!", "not the JSON asked for"),
        ('["score", 1]', "not a JSON object"),
        ({"score": "high", "reason": "x"}, "must be a number from 0 to 1"),
        ({"score": 7, "reason": "x"}, "must be a number from 0 to 1"),
        ({"score": True, "reason": "x"}, "must be a number from 0 to 1"),
        ('```json\n{"score": 0.9', "not the JSON asked for"),
    ],
)
def test_unparseable_judge_output_is_a_failed_verdict_with_the_reason(
    reply: Any, says: str
) -> None:
    verdict = check_judge(JudgeCheck(), ScriptedModel([reply]), CRITERIA, result({"a": 1}))
    assert not verdict.passed
    assert says in verdict.reason


def test_a_fenced_json_reply_is_accepted() -> None:
    judge = ScriptedModel(['```json\n{"score": 0.9, "reason": "ok"}\n```'])
    assert check_judge(JudgeCheck(), judge, CRITERIA, result({"a": 1})).passed


def test_a_judge_that_raises_or_refuses_fails_the_check() -> None:
    def broken(messages: list[ChatMessage]) -> str:
        raise RuntimeError("connection reset")

    verdict = check_judge(JudgeCheck(), ScriptedModel(broken), CRITERIA, result({"a": 1}))
    assert not verdict.passed
    assert "connection reset" in verdict.reason


def test_without_criteria_there_is_nothing_to_judge() -> None:
    verdict = check_judge(JudgeCheck(), ScriptedModel([{"score": 1}]), [], result({"a": 1}))
    assert not verdict.passed
    assert "no acceptance criteria" in verdict.reason
    with pytest.raises(JudgeError, match="no acceptance criteria"):
        compare(ScriptedModel([{"better": "A"}]), [], 1, 2)


def test_a_comparison_reply_that_is_not_a_choice_is_an_error() -> None:
    with pytest.raises(JudgeError, match='"A", "B" or "tie"'):
        compare(ScriptedModel([{"better": "both", "reason": "?"}]), CRITERIA, 1, 2)


def test_grade_returns_the_score_and_the_model() -> None:
    judge = ScriptedModel([{"score": 1, "reason": "all met"}], name="m", provider="p")
    graded = grade(judge, CRITERIA, "text")
    assert (graded.score, graded.model) == (1.0, "p:m")
