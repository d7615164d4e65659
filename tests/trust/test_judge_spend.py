"""What a judge spends is the task's spend: logged per attempt, counted by the budgets.

The judge runs in the leader, so no worker reports its tokens; the reviewer
charges them to the task it judged (``kind: judge`` entries in the spend log).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tenure.models import ChatMessage, Price, ScriptedModel, count_tokens
from tenure.roles.register import read_task
from tenure.roles.register import spend as budget
from tenure.store import Store
from tenure.verify import Trust

from .harness import Crew, Recording, plan_of, task

PRICE = Price(3.0, 15.0)


def grading(*scores: float) -> ScriptedModel:
    replies = iter(scores)

    def grader(messages: list[ChatMessage]) -> dict[str, Any]:
        return {"score": next(replies), "reason": "checked each criterion"}

    return ScriptedModel(grader, name="grader", provider="scripted", price=PRICE)


def judged_task(**fields: Any) -> dict[str, Any]:
    return {
        "id": "summary",
        "acceptance_criteria": ["names the vendor"],
        "checks": [{"kind": "judge", "pass_threshold": 0.7}],
        **fields,
    }


def writer(env: Any, ctx: Any) -> dict[str, Any]:
    return {"status": "completed", "artifact": {"summary": f"draft {env.attempt}"}}


def test_each_judged_attempt_logs_the_judges_tokens_and_cost(store: Store, tmp_path: Path) -> None:
    judge = grading(0.2, 0.9)
    crew = Crew(store, tmp_path, plan_of(judged_task()), trust=Trust(judge=judge))
    crew.hire("w1", Recording(writer))
    crew.run()
    record = task(store, "summary")
    assert (record.state, record.attempt) == ("done", 2)
    charged = [e for e in record.data["spend_log"] if e.get("kind") == "judge"]
    assert [(e["attempt"], e["calls"]) for e in charged] == [(1, 1), (2, 1)]
    for entry, conversation, score in zip(charged, judge.calls, (0.2, 0.9), strict=True):
        tokens_in = sum(count_tokens(m.content) for m in conversation)
        reply = json.dumps({"score": score, "reason": "checked each criterion"})
        assert (entry["input_tokens"], entry["output_tokens"]) == (tokens_in, count_tokens(reply))
        assert entry["cost_usd"] == round(PRICE.cost(tokens_in, count_tokens(reply)), 8)
        assert entry["model"] == "scripted:grader"
    totals = budget.task_totals(read_task(record))
    assert totals.calls == 2  # the worker called no model: all of it is the judge's


def test_a_token_budget_spent_by_the_judge_stops_the_retry(store: Store, tmp_path: Path) -> None:
    judge = grading(0.2, 0.9)
    plan = plan_of(judged_task(budget={"tokens": 20}))
    crew = Crew(store, tmp_path, plan, trust=Trust(judge=judge))
    executor = Recording(writer)
    crew.hire("w1", executor)
    crew.run()
    record = task(store, "summary")
    assert record.state == "failed"
    assert record.reason is not None and record.reason.startswith("budget exceeded: ")
    assert "judge check failed" in record.reason
    assert len(judge.calls) == 1 and len(executor.calls) == 1  # no second attempt


def test_no_judge_no_judge_spend(store: Store, tmp_path: Path) -> None:
    plan = plan_of({"id": "plain", "output_schema": {"type": "object"}})
    crew = Crew(store, tmp_path, plan, trust=Trust())
    crew.hire("w1", Recording(lambda env, ctx: {"ok": True}))
    crew.run()
    record = task(store, "plain")
    assert record.state == "done"
    assert not [e for e in record.data.get("spend_log", []) if e.get("kind") == "judge"]


def test_a_tie_break_judge_settling_a_quorum_is_charged_to_the_task(
    store: Store, tmp_path: Path
) -> None:
    from .harness import judge_preferring
    from .test_policies import price_team

    judge = judge_preferring('"price": 120')
    crew, _ = price_team(
        store, tmp_path, {"judge": {"model": "fair"}}, Trust(models={"fair": judge})
    )
    record = task(store, "acme-price")
    assert record.state == "done"
    charged = [e for e in record.data["spend_log"] if e.get("kind") == "judge"]
    assert sum(e["calls"] for e in charged) == len(judge.calls) == 2  # both orders
    tokens_in = sum(count_tokens(m.content) for c in judge.calls for m in c)
    assert sum(e["input_tokens"] for e in charged) == tokens_in
    assert crew.conductor.trust.meter.calls == 2
