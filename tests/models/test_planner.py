"""The LLM planner: a plan is validated before dispatch and re-asked with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenure.models import ScriptedModel, open_model
from tenure.protocol import ConfigError, PlanTask
from tenure.roles.planning.planner import (
    Artifact,
    Planner,
    PlanningFailed,
    artifacts_from,
    check_scopes,
    looks_like_reference,
)

from .conftest import ServerFactory
from .wire_server import answer, text

ARTIFACTS = [Artifact("vendors/acme.txt"), Artifact("vendors/bluefin.txt")]


def extract(vendor: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"price-{vendor}",
        "goal": f"Extract {vendor}'s monthly price.",
        "acceptance_criteria": ["Every value has the page as its source."],
        "checks": [{"kind": "evidence", "max_age_seconds": 3600}],
        "input": {"vendor": vendor, "page": f"vendors/{vendor}.txt"},
        **extra,
    }


MERGE = {
    "id": "merge",
    "goal": "Merge the prices into pricing.json.",
    "input": {"output_file": "pricing.json"},
    "scope": ["pricing.json"],
    "depends_on": ["price-acme", "price-bluefin"],
}
GOOD = {"tasks": [extract("acme"), extract("bluefin"), MERGE]}


def rejections(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [data["reason"] for kind, data in events if kind == "planner.rejected"]


def planner_for(replies: list[Any]) -> tuple[Planner, ScriptedModel, list[Any]]:
    events: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(replies)
    return Planner(model, on_event=lambda k, d: events.append((k, d))), model, events


def test_a_valid_plan_is_accepted_at_once_with_its_planning_spend() -> None:
    planner, model, events = planner_for([GOOD])
    plan = planner.plan("Price two vendors.", ARTIFACTS, team="pricing", max_attempts=2)
    assert [t.id for t in plan.tasks] == ["price-acme", "price-bluefin", "merge"]
    assert (plan.team, plan.goal, plan.max_attempts) == ("pricing", "Price two vendors.", 2)
    assert plan.planning_spend is not None and plan.planning_spend.calls == 1
    assert plan.planning_spend.input_tokens > 0
    prompt = model.calls[0][1].content
    assert "- vendors/acme.txt (file)" in prompt and "Goal: Price two vendors." in prompt
    assert rejections(events) == []


def test_a_plan_with_a_cycle_is_rejected_with_the_reason_and_re_asked() -> None:
    cyclic = {
        "tasks": [
            extract("acme", depends_on=["price-bluefin"]),
            extract("bluefin", depends_on=["price-acme"]),
        ]
    }
    planner, model, events = planner_for([cyclic, GOOD])
    plan = planner.plan("Price two vendors.", ARTIFACTS)
    assert len(plan.tasks) == 3
    [reason] = rejections(events)
    assert "no dependency cycle" in reason and "price-acme" in reason
    re_ask = model.calls[1][-1].content
    assert re_ask.startswith("Your plan was rejected:") and "cycle" in re_ask


def test_a_task_naming_an_artifact_not_in_the_list_is_rejected_and_re_asked() -> None:
    invented = {"tasks": [extract("acme"), extract("zeta")]}
    planner, model, events = planner_for([invented, GOOD])
    planner.plan("Price two vendors.", ARTIFACTS)
    [reason] = rejections(events)
    assert "task 'price-zeta' names 'vendors/zeta.txt', which is not in the artifact list" in reason
    assert "vendors/zeta.txt" in model.calls[1][-1].content


def test_a_task_grounded_in_nothing_is_rejected() -> None:
    floating = {"tasks": [extract("acme"), {"id": "muse", "goal": "Think about pricing."}]}
    planner, _, events = planner_for([floating, GOOD])
    planner.plan("Price two vendors.", ARTIFACTS)
    [reason] = rejections(events)
    assert "task 'muse' is grounded in no listed artifact" in reason


def test_overlapping_scopes_of_tasks_that_may_run_together_are_rejected() -> None:
    overlap = {
        "tasks": [
            extract("acme", scope=["out/"], input={"page": "vendors/acme.txt"}),
            extract("bluefin", scope=["out/bluefin.json"]),
        ]
    }
    planner, model, events = planner_for([overlap, GOOD])
    planner.plan("Price two vendors.", ARTIFACTS)
    [reason] = rejections(events)
    assert "tasks 'price-acme' and 'price-bluefin' both write 'out/'" in reason
    assert "disjoint scopes" in model.calls[1][-1].content


def test_ordered_tasks_may_write_the_same_path() -> None:
    first = PlanTask(id="draft", goal="g", scope=["report.md"], input={"p": "a.txt"})
    second = PlanTask(id="edit", goal="g", scope=["report.md"], depends_on=["draft"])
    check_scopes([first, second])  # no error


def test_an_answer_that_is_not_json_is_re_asked() -> None:
    planner, _, events = planner_for(["Here's my plan: first, ...", GOOD])
    planner.plan("Price two vendors.", ARTIFACTS)
    assert rejections(events)[0].startswith("the answer is not JSON")


def test_a_planner_that_never_gets_it_right_fails_with_the_last_reason() -> None:
    invented = {"tasks": [extract("zeta")]}
    planner, model, _ = planner_for([invented])
    with pytest.raises(PlanningFailed) as caught:
        planner.plan("Price two vendors.", ARTIFACTS)
    assert "no valid plan in 3 tries" in str(caught.value)
    assert "vendors/zeta.txt" in str(caught.value)
    assert len(model.calls) == 3


def test_a_malformed_task_is_rejected_with_its_field() -> None:
    bad = {"tasks": [{"id": "has space", "goal": "x", "input": {"p": "vendors/acme.txt"}}]}
    planner, _, events = planner_for([bad, GOOD])
    planner.plan("Price two vendors.", ARTIFACTS)
    assert "tasks[0].id" in rejections(events)[0]


def test_the_planner_needs_artifacts() -> None:
    planner, _, _ = planner_for([GOOD])
    with pytest.raises(ConfigError, match="--artifact"):
        planner.plan("Price two vendors.", [])


def test_artifacts_must_exist_and_directories_list_their_files(tmp_path: Path) -> None:
    (tmp_path / "vendors").mkdir()
    (tmp_path / "vendors" / "acme.txt").write_text("x")
    found = artifacts_from(["vendors", "https://example.com/p"], tmp_path)
    assert [(a.name, a.kind) for a in found] == [
        ("vendors/", "dir"),
        ("vendors/acme.txt", "file"),
        ("https://example.com/p", "url"),
    ]
    with pytest.raises(ConfigError, match="artifact 'nope.txt' does not exist"):
        artifacts_from(["nope.txt"], tmp_path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("vendors/acme.txt", True),
        ("pricing.json", True),
        ("https://acme.example/pricing", True),
        ("acme", False),
        ("USD", False),
        ("per user per month", False),
    ],
)
def test_what_counts_as_naming_an_artifact(value: str, expected: bool) -> None:
    assert looks_like_reference(value) is expected


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_planner_over_the_wire_is_re_asked_after_a_cycle(
    wire: ServerFactory, provider: str
) -> None:
    cyclic = {"tasks": [extract("acme", depends_on=["price-acme"])]}
    server = wire([text("not a plan"), answer(cyclic), answer(GOOD)])
    url = server.openai_url if provider == "openai" else server.anthropic_url
    plan = Planner(open_model(f"{provider}:planner@{url}")).plan("Price.", ARTIFACTS)
    assert [t.id for t in plan.tasks] == ["price-acme", "price-bluefin", "merge"]
    assert len(server.requests) == 3
    last = server.requests[2]["messages"][-1]["content"]
    assert "depends on itself" in last
