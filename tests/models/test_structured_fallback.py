"""A server that refuses ``json_schema`` structured output (llama-cpp-python answers HTTP
500) gets one ``json_object`` request with the schema in the prompt, says so, and is
remembered; the answer is validated all the same. Real SDK, local wire server."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tenure.executors import TaskContext
from tenure.executors.llm import LLMExecutor
from tenure.models import ChatMessage, ModelError, open_model
from tenure.protocol import TaskEnvelope, idempotency_key

from .conftest import ServerFactory
from .wire_server import Reply, answer, error

ROW = {
    "type": "object",
    "required": ["monthly_usd"],
    "properties": {"monthly_usd": {"type": "number"}},
}


def llama_cpp(good: Any) -> Any:
    """Answers 500 to ``json_schema``, like llama-cpp-python; ``good`` to anything else."""
    replies = list(good) if isinstance(good, list) else [good]

    def respond(provider: str, body: dict[str, Any]) -> Reply:
        form = (body.get("response_format") or {}).get("type")
        if form == "json_schema":
            return error(500, "Internal Server Error")
        return answer(replies.pop(0) if len(replies) > 1 else replies[0])

    return respond


def forms(requests: list[dict[str, Any]]) -> list[str | None]:
    return [(r.get("response_format") or {}).get("type") for r in requests]


def envelope() -> TaskEnvelope:
    return TaskEnvelope.model_validate(
        {
            "task_id": "price",
            "idempotency_key": idempotency_key("price", 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "w1",
            "deadline_seconds": 30,
            "goal": "Give Acme's monthly price.",
            "output_schema": ROW,
        }
    )


def context(tmp_path: Path, events: list[tuple[str, dict[str, Any]]]) -> TaskContext:
    return TaskContext(
        worker_id="w1",
        team="t",
        workdir=tmp_path,
        record_event=lambda kind, data: events.append((kind, data)),
    )


def test_a_refused_json_schema_falls_back_once_to_json_object_and_says_so(
    wire: ServerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    done = {"status": "completed", "artifact": {"monthly_usd": 29}}
    server = wire(responder=llama_cpp(done))
    model = open_model(f"llamacpp:local@{server.openai_url}")  # the SDK's default retries
    assert model.max_retries == 3  # type: ignore[attr-defined]
    events: list[tuple[str, dict[str, Any]]] = []
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tenure.models"):
        result = LLMExecutor(model).execute(envelope(), context(tmp_path, events))
    assert time.monotonic() - started < 1.5  # no backoff between retries of a refused form
    assert result.status == "completed", result.notes
    assert result.artifact == {"monthly_usd": 29}
    assert forms(server.requests) == ["json_schema", "json_object"]  # one retry, not more
    system = server.requests[1]["messages"][0]
    assert system["role"] == "system" and '"monthly_usd"' in system["content"]
    assert "matches this JSON Schema" in system["content"]
    [said] = [data for kind, data in events if kind == "model.fallback"]
    assert "refused structured output" in said["reason"] and "HTTP 500" in said["reason"]
    assert said["task_id"] == "price"
    assert any("falling back to json_object" in r.getMessage() for r in caplog.records)
    # remembered for the model: the next call goes straight to json_object, unannounced
    again = LLMExecutor(model).execute(envelope(), context(tmp_path, events))
    assert again.status == "completed"
    assert forms(server.requests) == ["json_schema", "json_object", "json_object"]
    assert len([k for k, _ in events if k == "model.fallback"]) == 1


def test_the_fallback_answer_is_still_validated_and_repaired(
    wire: ServerFactory, tmp_path: Path
) -> None:
    wrong = {"status": "completed", "artifact": {"monthly_usd": "29 dollars"}}
    right = {"status": "completed", "artifact": {"monthly_usd": 29}}
    server = wire(responder=llama_cpp([wrong, right]))
    model = open_model(f"llamacpp:local@{server.openai_url}", max_retries=0)
    result = LLMExecutor(model).execute(envelope(), context(tmp_path, []))
    assert result.status == "completed"
    assert result.artifact == {"monthly_usd": 29}
    assert forms(server.requests) == ["json_schema", "json_object", "json_object"]
    assert "is not of type 'number'" in server.requests[2]["messages"][-1]["content"]


def test_a_server_that_refuses_json_object_too_gives_one_error(wire: ServerFactory) -> None:
    server = wire([error(500, "no grammar support")])
    model = open_model(f"llamacpp:broken@{server.openai_url}", max_retries=0)
    with pytest.raises(ModelError) as caught:
        model.complete([ChatMessage("user", "price?")], json_schema=ROW)
    assert "json_schema was refused (HTTP 500), and json_object too" in str(caught.value)
    assert caught.value.kind == "server"
    assert forms(server.requests) == ["json_schema", "json_object"]
    # not remembered: nothing worked, so the next call asks for json_schema again
    with pytest.raises(ModelError):
        model.complete([ChatMessage("user", "price?")], json_schema=ROW)
    assert forms(server.requests)[2] == "json_schema"


def test_a_rate_limit_is_not_taken_for_a_refused_form(wire: ServerFactory) -> None:
    server = wire([error(429, "slow down")])
    model = open_model(f"llamacpp:busy@{server.openai_url}", max_retries=0)
    with pytest.raises(ModelError) as caught:
        model.complete([ChatMessage("user", "price?")], json_schema=ROW)
    assert caught.value.kind == "rate_limit"
    assert forms(server.requests) == ["json_schema"]


def _scripted(*replies: Reply) -> Any:
    """The next reply for each ``json_schema`` request (the last repeats); an answer to
    any other form, which none of these tests should send."""
    left = list(replies)

    def respond(provider: str, body: dict[str, Any]) -> Reply:
        if (body.get("response_format") or {}).get("type") != "json_schema":
            return error(418, "not asked for")
        return left.pop(0) if len(left) > 1 else left[0]

    return respond


def test_a_busy_server_is_asked_again_with_the_retries_left_not_taken_for_a_refusal(
    wire: ServerFactory,
) -> None:
    """A 429 on the first structured request is not a refusal: the request goes again,
    with what is left of the model's retries (1 try + 3 retries in all)."""
    server = wire(responder=_scripted(error(429), error(429), error(429), answer({"a": 1})))
    model = open_model(f"llamacpp:busy@{server.openai_url}")
    done = model.complete([ChatMessage("user", "price?")], json_schema=ROW)
    assert done.text == '{"a": 1}' and done.fallback is None
    assert forms(server.requests) == ["json_schema"] * 4


def test_once_a_server_took_json_schema_a_500_is_retried_not_a_fallback(
    wire: ServerFactory,
) -> None:
    """The first answer says the form is supported: later 500s are the server's trouble,
    retried by the SDK as usual, and json_schema stays the form."""
    server = wire(responder=_scripted(answer({"a": 1}), error(500), answer({"a": 2})))
    model = open_model(f"llamacpp:flaky@{server.openai_url}")
    model.complete([ChatMessage("user", "price?")], json_schema=ROW)
    again = model.complete([ChatMessage("user", "price?")], json_schema=ROW)
    assert again.text == '{"a": 2}' and again.fallback is None
    assert forms(server.requests) == ["json_schema"] * 3
