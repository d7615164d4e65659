"""Two researchers return different prices: each tie-break policy decides as documented
(docs/verification.md), in the real runtime, and the decision is in the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenure.executors import TaskContext
from tenure.protocol import TaskEnvelope
from tenure.store import Store
from tenure.verify import Trust

from .harness import Crew, Recording, ago, events, judge_preferring, plan_of, sycophant, task

# researcher -> (price, confidence, age of the source in seconds, model, capability)
RESEARCHERS = {
    "w-senior": (100, 0.9, 3600, "openai:gpt-4.1", "senior"),
    "w-junior": (120, 0.6, 60, "anthropic:claude-sonnet-4-5", "junior"),
}
CRITERIA = ["the current list price of ACME Basic in USD, from the vendor's own page"]


def researcher(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
    price, confidence, age, model, _ = RESEARCHERS[ctx.worker_id]
    return {
        "status": "completed",
        "artifact": {"price": price, "currency": "USD"},
        "confidence": confidence,
        "grounding": [{"input": "https://acme.example/pricing", "at": ago(age)}],
        "usage": {"model": model, "calls": 1},
    }


def run_price_team(
    store: Store, tmp_path: Path, policy: Any, trust: Trust | None = None
) -> Recording:
    return price_team(store, tmp_path, policy, trust)[1]


def price_team(
    store: Store, tmp_path: Path, policy: Any, trust: Trust | None = None
) -> tuple[Crew, Recording]:
    plan = plan_of(
        {
            "id": "acme-price",
            "goal": "find ACME Basic's list price",
            "acceptance_criteria": CRITERIA,
            "max_attempts": 1,
            "checks": [{"kind": "quorum", "k": 2, "n": 2, "decision": "price"}],
        },
        policies={"price": policy},
    )
    crew = Crew(store, tmp_path, plan, trust=trust)
    executor = Recording(researcher)
    for member, (*_, capability) in RESEARCHERS.items():
        crew.hire(member, executor, capabilities=(capability,))
    crew.run()
    return crew, executor


def tie_break(store: Store) -> dict[str, Any]:
    (event,) = [
        e for e in events(store, "decision", "acme-price") if e.data["stage"] == "tie-break"
    ]
    return event.data


FAIR = {"fair": judge_preferring('"price": 120')}
CASES: list[tuple[str, Any, Trust | None, str, int | None]] = [
    # id, policy spec, trust, outcome, winning price (None: no winner)
    ("freshest", "freshest", None, "winner", 120),
    (
        "confidence-calibrated",
        {"confidence": {"calibrated": True, "source": "verifier score"}},
        None,
        "winner",
        100,
    ),
    ("confidence-uncalibrated", "confidence", None, "abstained", None),
    ("authority", {"authority": {"roles": ["senior", "junior"]}}, None, "winner", 100),
    ("judge", {"judge": {"model": "fair"}}, Trust(models=FAIR), "winner", 120),
    ("judge-sycophant", "judge", Trust(judge=sycophant()), "undecided", None),
    ("quorum", {"quorum": {"k": 2}}, None, "undecided", None),
    ("human", "human", None, "escalated", None),
    (
        "chain-agree",
        {"chain": ["freshest", {"judge": {"model": "fair"}}, "human"]},
        Trust(models=FAIR),
        "winner",
        120,
    ),
    (
        "chain-disagree",
        {"chain": ["freshest", {"confidence": {"calibrated": True}}]},
        None,
        "escalated",
        None,
    ),
]


@pytest.mark.parametrize(
    ("policy", "trust", "outcome", "price"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_policy_settles_two_researchers_as_documented(
    store: Store,
    tmp_path: Path,
    policy: Any,
    trust: Trust | None,
    outcome: str,
    price: int | None,
) -> None:
    executor = run_price_team(store, tmp_path, policy, trust)
    # two independent executions, one per researcher
    assert sorted(executor.workers_for("acme-price")) == ["w-junior", "w-senior"]
    decision = tie_break(store)
    assert decision["decision"] == "price"
    assert decision["outcome"] == outcome, decision["reason"]
    assert len(decision["inputs"]) == 2
    assert {i["member"] for i in decision["inputs"]} == set(RESEARCHERS)
    record = task(store, "acme-price")
    if price is not None:
        assert record.state == "done"
        assert record.result is not None
        assert record.result["artifact"]["price"] == price
        winner = next(i for i in decision["inputs"] if i["ref"] == decision["winner"])
        assert f'"price": {price}' in winner["answer"]
    elif outcome == "escalated":
        assert record.state == "blocked"
        assert record.reason.startswith("tie-break:")
        assert "Which is right" in record.data["question"]
        assert events(store, "inbox.added", "acme-price")
    else:
        # undecided: the quorum check fails, and with no attempt left the task waits
        assert record.state == "blocked"
        assert "quorum check failed" in record.reason
        assert "did not decide" in record.reason
    count = [e for e in events(store, "decision", "acme-price") if e.data["stage"] == "count"]
    assert count[0].data["outcome"] == "undecided"
    assert "only 1 of 2 agree" in count[0].data["reason"]


def test_the_uncalibrated_confidence_policy_refuses_and_says_why(
    store: Store, tmp_path: Path
) -> None:
    run_price_team(store, tmp_path, "confidence")
    decision = tie_break(store)
    assert decision["reason"].startswith("refused:")
    assert "not declared calibrated" in decision["reason"]


def test_the_sycophantic_judge_is_a_tie_because_it_flips_with_the_order(
    store: Store, tmp_path: Path
) -> None:
    judge = sycophant()
    run_price_team(store, tmp_path, "judge", Trust(judge=judge))
    decision = tie_break(store)
    assert decision["winner"] is None
    assert "position bias" in decision["reason"]
    assert "shown first" in decision["reason"]
    # asked twice, once in each order
    assert len(judge.calls) == 2
    first, second = (c[-1].content for c in judge.calls)
    shown_first = [t.split("## Answer A", 1)[1].split("## Answer B", 1)[0] for t in (first, second)]
    assert ('"price": 100' in shown_first[0]) != ('"price": 100' in shown_first[1])


def test_disagreeing_policies_escalate_to_the_operator_inbox_and_an_answer_reruns(
    store: Store, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from tenure.console.cli import app

    crew, executor = price_team(
        store, tmp_path, {"chain": ["freshest", {"confidence": {"calibrated": True}}, "human"]}
    )
    decision = tie_break(store)
    assert decision["outcome"] == "escalated"
    assert "the policies disagree" in decision["reason"]
    assert [s["policy"] for s in decision["steps"]] == ["freshest", "confidence"]
    assert [s["outcome"] for s in decision["steps"]] == ["winner", "winner"]
    url = f"sqlite:///{tmp_path / 'state.db'}"
    inbox = CliRunner().invoke(app, ["inbox", "--store", url, "--team", "trust"])
    assert inbox.exit_code == 0, inbox.output
    assert "acme-price" in inbox.output
    assert "Which is right" in inbox.output
    answered = CliRunner().invoke(
        app,
        ["answer", "acme-price", "use the vendor page read today", "--store", url, "-t", "trust"],
    )
    assert answered.exit_code == 0, answered.output
    record = task(store, "acme-price")
    assert record.state == "queued"
    # the next round's voters see the operator's answer
    crew.run()
    round_two = [env for _, env in executor.calls if env.task_id.startswith("acme-price.q2.")]
    assert len(round_two) == 2
    for env in round_two:
        (qa,) = env.input["operator_answers"]
        assert qa["answer"] == "use the vendor page read today"
