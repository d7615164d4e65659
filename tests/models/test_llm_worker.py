"""The LLM worker: criteria first, a validated structured result, one repair, honest stops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenure.executors import TaskContext, resolve_executor
from tenure.executors.llm import LLMExecutor, render_envelope, result_schema
from tenure.models import ChatMessage, Price, ScriptedModel, open_model
from tenure.protocol import ConfigError, SourceEvidence, TaskEnvelope, idempotency_key

from .conftest import ServerFactory
from .wire_server import answer, error, refusal, slow, text

ROW = {
    "type": "object",
    "required": ["vendor", "monthly_usd"],
    "properties": {"vendor": {"type": "string"}, "monthly_usd": {"type": ["number", "null"]}},
}
GOOD = {
    "status": "completed",
    "artifact": {"vendor": "acme", "monthly_usd": 29},
    "evidence": [{"source": "vendors/acme.txt", "field": "monthly_usd"}],
    "notes": {"verified": []},
}


def envelope(**extra: Any) -> TaskEnvelope:
    data: dict[str, Any] = {
        "task_id": "price-acme",
        "idempotency_key": idempotency_key("price-acme", extra.pop("attempt", 1)),
        "epoch": 2,
        "attempt": 1,
        "assigned_to": "w1",
        "deadline_seconds": 30,
        "goal": "Extract Acme's monthly price.",
        "acceptance_criteria": ["Every value comes from the page.", "Unknown values are null."],
        "checks": [{"kind": "evidence", "max_age_seconds": 3600}],
        "input": {"vendor": "acme", "page": "vendors/acme.txt"},
        "scope": ["out/"],
        "output_schema": ROW,
    }
    data.update(extra)
    data["attempt"] = int(data["idempotency_key"].rsplit("-", 1)[1])
    return TaskEnvelope.model_validate(data)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.progress: list[tuple[str, float | None]] = []


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "vendors").mkdir()
    (tmp_path / "vendors" / "acme.txt").write_text("Plan: Team\nPrice: $29 per user per month\n")
    return tmp_path


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def context(workdir: Path, rec: Recorder) -> TaskContext:
    return TaskContext(
        worker_id="w1",
        team="unit",
        workdir=workdir,
        report_progress=lambda m, f: rec.progress.append((m, f)),
        record_event=lambda kind, data: rec.events.append((kind, data)),
    )


def user_prompt(model: ScriptedModel, call: int = 0) -> str:
    return model.calls[call][1].content


# --- rendering ----------------------------------------------------------------------------


def test_the_prompt_puts_the_criteria_first_and_the_output_schema_last(workdir: Path) -> None:
    env = envelope(history=[{"attempt": 1, "status": "rejected", "failure": "no source"}])
    from tenure.executors.llm import read_materials

    prompt = render_envelope(env, read_materials(env, workdir))
    order = [
        "## Acceptance criteria",
        "1. Every value comes from the page.",
        "## Checks the leader runs",
        "## Goal",
        "## Input",
        "## Materials",
        "Price: $29",
        "## Scope",
        "## Earlier attempts that failed",
        "attempt 1 (rejected): no source",
        "## Output",
    ]
    positions = [prompt.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert prompt.index("## Acceptance criteria") == 0


# --- answers ------------------------------------------------------------------------------


def test_a_valid_answer_becomes_a_result_with_stamped_sources_and_usage(
    workdir: Path, rec: Recorder
) -> None:
    model = ScriptedModel([GOOD], price=Price(1_000_000.0, 1_000_000.0))
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "completed"
    assert result.artifact == {"vendor": "acme", "monthly_usd": 29}
    [source] = result.evidence
    assert isinstance(source, SourceEvidence)
    assert (source.source, source.field) == ("vendors/acme.txt", "monthly_usd")
    assert [g.input for g in result.grounding] == ["vendors/acme.txt"]
    assert result.usage is not None and result.usage.calls == 1
    assert result.usage.cost_usd == result.usage.input_tokens + result.usage.output_tokens
    assert rec.events[0][0] == "model.call" and rec.events[0][1]["purpose"] == "work"
    assert len(model.calls) == 1


def test_malformed_json_is_repaired_once_with_the_error_shown(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel(['{"status": "completed", "artifact": {', GOOD])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "completed"
    repair = model.calls[1][-1].content
    assert repair.startswith("Your reply was not a valid result: it is not JSON")
    assert model.calls[1][-2] == ChatMessage("assistant", '{"status": "completed", "artifact": {')
    assert [e[1]["purpose"] for e in rec.events] == ["work", "repair"]
    assert result.usage is not None and result.usage.calls == 2


def test_an_artifact_off_the_output_schema_is_repaired_with_its_path(
    workdir: Path, rec: Recorder
) -> None:
    bad = {**GOOD, "artifact": {"vendor": "acme", "monthly_usd": "29 dollars"}}
    model = ScriptedModel([bad, GOOD])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "completed"
    assert "at /artifact/monthly_usd" in model.calls[1][-1].content


def test_a_second_invalid_answer_fails_the_attempt_without_a_third_call(
    workdir: Path, rec: Recorder
) -> None:
    model = ScriptedModel(["not json", "still not json"])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "failed"
    assert "not a valid result, also after one repair" in result.notes.uncertain[0]
    assert len(model.calls) == 2


def test_blocked_is_returned_with_its_question_not_retried(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel([{"status": "blocked", "question": "Which currency?"}])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert (result.status, result.question) == ("blocked", "Which currency?")
    assert len(model.calls) == 1


def test_blocked_without_a_question_is_invalid_and_repaired(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel([{"status": "blocked"}, {"status": "blocked", "question": "Which?"}])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "blocked"
    assert '"blocked" needs a "question"' in model.calls[1][-1].content


def test_refused_is_honoured(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel([{"status": "refused", "notes": {"uncertain": ["not allowed"]}}])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "refused"
    assert result.notes.uncertain == ["not allowed"]


def test_a_cited_source_the_worker_never_had_is_dropped_and_said(
    workdir: Path, rec: Recorder
) -> None:
    made_up = {**GOOD, "evidence": [{"source": "https://acme.example/pricing", "field": "x"}]}
    result = LLMExecutor(ScriptedModel([made_up])).execute(envelope(), context(workdir, rec))
    assert result.evidence == []
    assert any("was not given; dropped" in note for note in result.notes.uncertain)


def test_multi_turn_restates_the_criteria_at_every_check_in(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel(
        [
            {"status": "continue", "progress": "read the page"},
            {"status": "continue", "progress": "found the price"},
            GOOD,
        ]
    )
    result = LLMExecutor(model, max_turns=3).execute(envelope(), context(workdir, rec))
    assert result.status == "completed"
    assert [p[0] for p in rec.progress] == ["read the page", "found the price"]
    for call in (1, 2):
        checkin = model.calls[call][-1].content
        assert "The acceptance criteria, restated:" in checkin
        assert "1. Every value comes from the page." in checkin
        assert "2. Unknown values are null." in checkin
    assert "last turn" in model.calls[2][-1].content
    assert "continue" not in json.dumps(model.calls[0][0].content)


def test_continue_is_not_a_status_on_a_single_turn_task(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel([{"status": "continue"}, {"status": "continue"}])
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "failed"
    assert "continue" not in result_schema(envelope())["properties"]["status"]["enum"]


def test_the_artifact_is_written_to_an_output_file_inside_the_scope(
    workdir: Path, rec: Recorder
) -> None:
    env = envelope(
        input={"vendor": "acme", "page": "vendors/acme.txt", "output_file": "out/a.json"}
    )
    result = LLMExecutor(ScriptedModel([GOOD])).execute(env, context(workdir, rec))
    assert result.status == "completed"
    assert json.loads((workdir / "out" / "a.json").read_text()) == GOOD["artifact"]
    assert "out/a.json" in result.notes.changed


def test_an_output_file_outside_the_scope_fails(workdir: Path, rec: Recorder) -> None:
    env = envelope(input={"page": "vendors/acme.txt", "output_file": "../escape.json"})
    result = LLMExecutor(ScriptedModel([GOOD])).execute(env, context(workdir, rec))
    assert result.status == "failed"
    assert "outside the task's scope" in result.notes.uncertain[0]
    assert not (workdir.parent / "escape.json").exists()


# --- budgets ------------------------------------------------------------------------------


def test_a_token_budget_too_small_for_the_prompt_stops_before_any_call(
    workdir: Path, rec: Recorder
) -> None:
    model = ScriptedModel([GOOD])
    env = envelope(budget={"tokens": 50})
    result = LLMExecutor(model).execute(env, context(workdir, rec))
    assert result.status == "failed"
    assert result.notes.uncertain[0].startswith("budget exceeded: tokens")
    assert model.calls == []
    assert rec.events[-1][0] == "budget.stopped"


def test_a_token_budget_caps_max_tokens_of_the_call(workdir: Path, rec: Recorder) -> None:
    seen: list[int | None] = []

    class Capturing(ScriptedModel):
        def complete(
            self, messages: Any, *, json_schema: Any = None, max_tokens: Any = None
        ) -> Any:
            seen.append(max_tokens)
            return super().complete(messages, json_schema=json_schema, max_tokens=max_tokens)

    LLMExecutor(Capturing([GOOD])).execute(envelope(budget={"tokens": 5000}), context(workdir, rec))
    assert seen[0] is not None and seen[0] < 5000


def test_a_cost_budget_on_an_unpriced_model_refuses_to_spend(workdir: Path, rec: Recorder) -> None:
    class Unpriced(ScriptedModel):
        price = None  # type: ignore[assignment]

    model = Unpriced([GOOD], name="mystery", provider="openai")
    model.price = None  # type: ignore[assignment]
    result = LLMExecutor(model).execute(envelope(budget={"cost_usd": 1.0}), context(workdir, rec))
    assert result.status == "failed"
    assert "no price for this model" in result.notes.uncertain[0]
    assert model.calls == []


def test_a_repair_that_would_overrun_the_budget_stops_instead(workdir: Path, rec: Recorder) -> None:
    model = ScriptedModel(["x " * 600, GOOD])
    from tenure.executors.llm import estimate_tokens, render_envelope

    env = envelope()
    first = estimate_tokens([ChatMessage("user", render_envelope(env))])
    limited = envelope(budget={"tokens": first + 700})
    result = LLMExecutor(model).execute(limited, context(workdir, rec))
    assert result.status == "failed"
    assert "budget exceeded" in result.notes.uncertain[0]
    assert len(model.calls) == 1


# --- through the real SDKs -----------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_worker_over_the_wire_repairs_then_completes(
    wire: ServerFactory, workdir: Path, rec: Recorder, provider: str
) -> None:
    server = wire([text("Sure! Here is the price: 29"), answer(GOOD)])
    url = server.openai_url if provider == "openai" else server.anthropic_url
    model = open_model(f"{provider}:w@{url}", max_retries=0)
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "completed", result.notes
    assert len(server.requests) == 2
    repair = server.requests[1]["messages"][-1]["content"]
    assert "not a valid result" in repair


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_worker_over_the_wire_honours_a_refusal(
    wire: ServerFactory, workdir: Path, rec: Recorder, provider: str
) -> None:
    server = wire([refusal("I can't do that.")])
    url = server.openai_url if provider == "openai" else server.anthropic_url
    result = LLMExecutor(open_model(f"{provider}:w@{url}")).execute(
        envelope(), context(workdir, rec)
    )
    assert result.status == "refused"
    assert result.notes.uncertain == ["I can't do that."]


def test_a_server_error_fails_the_attempt_with_the_reason(
    wire: ServerFactory, workdir: Path, rec: Recorder
) -> None:
    server = wire([error(503, "overloaded")])
    model = open_model(f"openai:w@{server.openai_url}", max_retries=1)
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "failed"
    assert "model call failed (server)" in result.notes.uncertain[0]
    assert "overloaded" in result.notes.uncertain[0]


def test_a_timeout_fails_the_attempt(wire: ServerFactory, workdir: Path, rec: Recorder) -> None:
    server = wire([slow(3.0, GOOD)])
    model = open_model(f"openai:w@{server.openai_url}", max_retries=0, timeout=0.3)
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "failed"
    assert "model call failed (timeout)" in result.notes.uncertain[0]


def test_a_refused_key_blocks_for_a_person_instead_of_retrying(
    wire: ServerFactory, workdir: Path, rec: Recorder
) -> None:
    server = wire([error(401, "bad key")])
    model = open_model(f"openai:w@{server.openai_url}", max_retries=0)
    result = LLMExecutor(model).execute(envelope(), context(workdir, rec))
    assert result.status == "blocked"
    assert result.question is not None and "fix the model settings" in result.question


# --- the registry spec ----------------------------------------------------------------------


def test_llm_without_a_model_is_one_clear_line() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_executor("llm", field="--exec")
    message = str(caught.value)
    assert "\n" not in message
    assert "no model configured: set TENURE_MODEL" in message


def test_llm_spec_names_its_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    executor = resolve_executor("llm:openai:gpt-4.1")
    assert isinstance(executor, LLMExecutor)
    assert (executor.model.provider, executor.model.name) == ("openai", "gpt-4.1")


def test_llm_takes_tenure_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_MODEL", "ollama:llama3.1")
    executor = resolve_executor("llm")
    assert isinstance(executor, LLMExecutor)
    assert getattr(executor.model, "base_url", None) == "http://localhost:11434/v1"
