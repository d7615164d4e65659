"""No known secret reaches a model: whatever the prompt was built from (a task's input,
an earlier attempt's failure, a material file, a goal to plan, the register), the
conversation a provider receives over the wire has it masked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tenure.executors import TaskContext
from tenure.executors.llm import LLMExecutor
from tenure.models import open_model
from tenure.protocol import Plan, TaskEnvelope, idempotency_key
from tenure.roles import LocalTeam
from tenure.roles.planning.planner import Artifact, Planner
from tenure.store import open_store

from .conftest import ServerFactory
from .wire_server import answer

SECRET = "ghp_models0123456789abcdefXYZ"
RESULT = {
    "status": "completed",
    "artifact": {"vendor": "acme"},
    "evidence": [{"source": "vendors/acme.txt"}],
    "notes": {"verified": []},
}
PLAN = {
    "tasks": [
        {
            "id": "price-acme",
            "goal": "Extract Acme's price.",
            "input": {"page": "vendors/acme.txt"},
            "checks": [{"kind": "evidence", "max_age_seconds": 3600}],
        }
    ]
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    (tmp_path / "vendors").mkdir()
    (tmp_path / "vendors" / "acme.txt").write_text(f"Price: $29\nadmin token: {SECRET}\n")
    return tmp_path


def sent(server_requests: list[dict[str, object]]) -> str:
    return json.dumps(server_requests)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_worker_prompt_never_carries_a_secret_from_input_history_or_materials(
    wire: ServerFactory, workdir: Path, provider: str
) -> None:
    server = wire([answer(RESULT)])
    url = server.openai_url if provider == "openai" else server.anthropic_url
    envelope = TaskEnvelope.model_validate(
        {
            "task_id": "price-acme",
            "idempotency_key": idempotency_key("price-acme", 2),
            "epoch": 1,
            "attempt": 2,
            "assigned_to": "w1",
            "deadline_seconds": 30,
            "goal": f"Extract Acme's price (log in with {SECRET}).",
            "acceptance_criteria": ["Every value comes from the page."],
            "input": {"page": "vendors/acme.txt", "token": SECRET},
            "history": [{"attempt": 1, "status": "failed", "failure": f"login {SECRET} refused"}],
        }
    )
    ctx = TaskContext(worker_id="w1", team="unit", workdir=workdir)
    LLMExecutor(open_model(f"{provider}:w@{url}", max_retries=0)).execute(envelope, ctx)
    body = sent(server.requests)
    assert server.requests and SECRET not in body
    assert body.count("***") >= 4  # goal, input, history, material


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_planner_prompt_never_carries_a_secret_from_the_goal(
    wire: ServerFactory, workdir: Path, provider: str
) -> None:
    server = wire([answer(PLAN)])
    url = server.openai_url if provider == "openai" else server.anthropic_url
    planner = Planner(open_model(f"{provider}:planner@{url}", max_retries=0))
    planner.plan(f"Price Acme; the portal token is {SECRET}.", [Artifact("vendors/acme.txt")])
    body = sent(server.requests)
    assert server.requests and SECRET not in body and "***" in body


def test_a_team_of_model_workers_sends_no_secret_from_its_plan(
    wire: ServerFactory, workdir: Path
) -> None:
    server = wire([answer(RESULT)])
    plan = Plan.model_validate(
        {
            "team": "secret-models",
            "tasks": [
                {
                    "id": "price-acme",
                    "goal": "Extract Acme's price.",
                    "input": {"page": "vendors/acme.txt", "token": SECRET},
                }
            ],
        }
    )
    executor = LLMExecutor(open_model(f"openai:w@{server.openai_url}", max_retries=0))
    with open_store(f"sqlite:///{workdir / 'state.db'}") as store:
        assert LocalTeam(store, plan, executor, workers=1, workdir=workdir).run() == "settled"
        kept = json.dumps([t.spec for t in store.tasks("secret-models")])
        events = json.dumps([e.data for e in store.events("secret-models")])
    assert server.requests and SECRET not in sent(server.requests)
    assert SECRET not in kept and SECRET not in events
