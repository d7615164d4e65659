"""A local team with LLM workers: budgets stop work with a reason in the register, and a
task that exhausts its attempts is split once by the planner before it reaches a person."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenure.coord import LeaseTiming
from tenure.executors.llm import LLMExecutor
from tenure.models import ChatMessage, Price, ScriptedModel
from tenure.protocol import Plan
from tenure.roles.features.split import Splitter
from tenure.roles.planning.planner import Artifact, Planner
from tenure.roles.register import read_task
from tenure.roles.register import spend as budget
from tenure.roles.teams.local import LocalTeam
from tenure.store import Store, TaskRecord, open_store

FAIL = {"status": "failed", "notes": {"uncertain": ["could not find it"]}}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    yield opened
    opened.close()


def run(store: Store, plan: dict[str, Any], executor: Any, tmp_path: Path, **kw: Any) -> None:
    team = LocalTeam(
        store,
        Plan.model_validate(plan),
        executor,
        workers=kw.pop("workers", 1),
        timing=LeaseTiming(ttl=5.0),
        state_dir=tmp_path / "state",
        workdir=tmp_path,
        **kw,
    )
    assert team.run(timeout=20) == "settled"


def tasks(store: Store) -> dict[str, TaskRecord]:
    return {t.task_id: t for t in store.tasks("t")}


def kinds(store: Store) -> list[str]:
    return [e.kind for e in store.events("t", limit=5000)]


def test_a_task_token_budget_stops_the_retries_with_the_reason(
    store: Store, tmp_path: Path
) -> None:
    model = ScriptedModel([FAIL])
    plan = {
        "team": "t",
        "max_attempts": 20,
        "tasks": [{"id": "a", "goal": "Find it.", "budget": {"tokens": 2000}}],
    }
    run(store, plan, LLMExecutor(model), tmp_path)
    record = tasks(store)["a"]
    assert record.state == "failed"
    assert record.reason.startswith("budget exceeded: ")
    assert 2 <= record.attempt < 20  # stopped long before the attempts ran out
    assert "budget.exceeded" in kinds(store)
    spend = budget.task_totals(read_task(record))
    assert spend.calls == len(model.calls) >= 2
    assert spend.tokens <= 2000 + 600  # at most one call's estimate past the limit


def test_the_envelope_carries_what_is_left_and_the_worker_caps_its_call(
    store: Store, tmp_path: Path
) -> None:
    seen: list[Any] = []

    def answer(messages: list[ChatMessage]) -> dict[str, Any]:
        return {"status": "completed", "artifact": {"ok": True}}

    class Watching(LLMExecutor):
        def execute(self, envelope: Any, ctx: Any) -> Any:
            seen.append(envelope.budget)
            return super().execute(envelope, ctx)

    plan = {
        "team": "t",
        "budget": {"tokens": 100_000, "cost_usd": 5.0},
        "tasks": [{"id": "a", "goal": "Do it.", "budget": {"tokens": 20_000}}],
    }
    run(store, plan, Watching(ScriptedModel(answer, price=Price(1.0, 1.0))), tmp_path)
    assert tasks(store)["a"].state == "done"
    assert seen[0].tokens == 20_000 and seen[0].cost_usd == 5.0


def test_a_team_budget_spent_by_one_task_stops_the_next_at_dispatch(
    store: Store, tmp_path: Path
) -> None:
    def answer(messages: list[ChatMessage]) -> dict[str, Any]:
        return {"status": "completed", "artifact": {"text": "word " * 2500}}

    plan = {
        "team": "t",
        "budget": {"tokens": 2000},
        "tasks": [
            {"id": "first", "goal": "Write a lot."},
            {"id": "second", "goal": "Write more.", "depends_on": ["first"]},
        ],
    }
    run(store, plan, LLMExecutor(ScriptedModel(answer)), tmp_path)
    records = tasks(store)
    assert records["first"].state == "done"
    assert records["second"].state == "failed"
    assert records["second"].reason.startswith("budget exceeded: the team used ")
    assert records["second"].attempt == 0  # never dispatched


def test_a_wall_time_budget_stops_a_slow_task(store: Store, tmp_path: Path) -> None:
    import time

    def slow(messages: list[ChatMessage]) -> dict[str, Any]:
        time.sleep(0.3)
        return FAIL

    plan = {
        "team": "t",
        "max_attempts": 5,
        "tasks": [{"id": "a", "goal": "Slowly.", "budget": {"wall_seconds": 0.5}}],
    }
    run(store, plan, LLMExecutor(ScriptedModel(slow)), tmp_path)
    record = tasks(store)["a"]
    assert record.state == "failed"
    assert "budget exceeded: task a ran" in record.reason and "of its 0.5s" in record.reason
    assert record.attempt < 5


def test_planning_spend_counts_against_the_team_budget(store: Store, tmp_path: Path) -> None:
    plan = {
        "team": "t",
        "budget": {"tokens": 100},
        "planning_spend": {"input_tokens": 90, "output_tokens": 20, "calls": 1},
        "tasks": [{"id": "a", "goal": "Anything."}],
    }
    run(store, plan, LLMExecutor(ScriptedModel([FAIL])), tmp_path)
    record = tasks(store)["a"]
    assert record.state == "failed"
    assert record.reason == "budget exceeded: the team used 110 tokens of its 100"


# --- split once before the inbox -----------------------------------------------------------


PARENT = {
    "id": "report",
    "goal": "Summarise both pages.",
    "input": {"pages": ["docs/a.txt", "docs/b.txt"]},
    "scope": ["out/"],
    "max_attempts": 2,
}


def worker_reply(messages: list[ChatMessage]) -> dict[str, Any]:
    prompt = messages[1].content
    if "Summarise both pages." in prompt.split("## Goal", 1)[1].split("##", 1)[0]:
        return FAIL  # the whole task is too much for this worker
    if "Combine" in prompt:
        return {"status": "completed", "artifact": {"summary": "a+b"}}
    return {"status": "completed", "artifact": {"summary": "one page"}}


SPLIT = {
    "tasks": [
        {"id": "a", "goal": "Summarise page a.", "input": {"page": "docs/a.txt"}},
        {"id": "b", "goal": "Summarise page b.", "input": {"page": "docs/b.txt"}},
        {
            "id": "join",
            "goal": "Combine the two summaries.",
            "depends_on": ["a", "b"],
            "input": {"output_file": "out/summary.json"},
            "scope": ["out/summary.json"],
        },
    ]
}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Page A.")
    (tmp_path / "docs" / "b.txt").write_text("Page B.")
    return tmp_path


def test_a_task_out_of_attempts_is_split_once_and_done_by_its_parts(
    store: Store, docs: Path
) -> None:
    planner_model = ScriptedModel([SPLIT])
    splitter = Splitter(Planner(planner_model), [Artifact("docs/a.txt"), Artifact("docs/b.txt")])
    plan = {
        "team": "t",
        "tasks": [PARENT, {"id": "after", "goal": "Use it.", "depends_on": ["report"]}],
    }
    run(store, plan, LLMExecutor(ScriptedModel(worker_reply)), docs, splitter=splitter)
    records = tasks(store)
    assert records["report"].state == "done"
    assert records["report"].reason == "done by its split tasks: report.a, report.b, report.join"
    assert records["report"].data["split_into"] == ["report.a", "report.b", "report.join"]
    assert (records["report"].result or {})["artifact"]["report.join"] == {"summary": "a+b"}
    assert records["report.join"].spec["depends_on"] == ["report.a", "report.b"]
    assert records["report.join"].spec["split_of"] == "report"
    assert records["after"].state == "done"
    assert json.loads((docs / "out" / "summary.json").read_text()) == {"summary": "a+b"}
    assert "task.split" in kinds(store)
    split_prompt = planner_model.calls[0][1].content
    assert "could not find it" in split_prompt  # the failures travel to the planner
    assert any(e.get("kind") == "split" for e in records["report"].data["spend_log"])


def test_a_split_that_names_unknown_artifacts_is_re_asked(store: Store, docs: Path) -> None:
    invented = {
        "tasks": [
            {"id": "a", "goal": "Summarise a.", "input": {"page": "docs/a.txt"}},
            {"id": "c", "goal": "Summarise c.", "input": {"page": "docs/c.txt"}},
        ]
    }
    planner_model = ScriptedModel([invented, SPLIT])
    splitter = Splitter(Planner(planner_model), [Artifact("docs/a.txt"), Artifact("docs/b.txt")])
    run(
        store,
        {"team": "t", "tasks": [PARENT]},
        LLMExecutor(ScriptedModel(worker_reply)),
        docs,
        splitter=splitter,
    )
    assert tasks(store)["report"].state == "done"
    assert "docs/c.txt" in planner_model.calls[1][-1].content


def test_a_split_part_that_fails_sends_the_parent_to_a_person(store: Store, docs: Path) -> None:
    splitter = Splitter(Planner(ScriptedModel([SPLIT])), [Artifact("docs/", "dir")], workdir=docs)
    run(
        store,
        {"team": "t", "tasks": [PARENT]},
        LLMExecutor(ScriptedModel([FAIL])),
        docs,
        splitter=splitter,
    )
    records = tasks(store)
    assert records["report.a"].state == "blocked"  # a part is never split again
    assert records["report.a"].reason.startswith("gave up after 2 attempts")
    assert records["report"].state == "blocked"
    assert records["report"].reason.startswith("split task report.")


def test_when_the_planner_cannot_split_the_task_goes_to_the_inbox(store: Store, docs: Path) -> None:
    splitter = Splitter(Planner(ScriptedModel(["no idea"])), [Artifact("docs/a.txt")])
    run(
        store,
        {"team": "t", "tasks": [PARENT]},
        LLMExecutor(ScriptedModel([FAIL])),
        docs,
        splitter=splitter,
    )
    record = tasks(store)["report"]
    assert record.state == "blocked"
    assert record.reason.startswith("gave up after 2 attempts")
    assert "task.split_failed" in kinds(store)
    assert set(tasks(store)) == {"report"}
