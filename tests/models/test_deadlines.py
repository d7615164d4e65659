"""A deadline (or a cancellation) stops model calls: the request's timeout is cut to the
time left, no request or retry starts after it, and the LLM worker stops its attempt
between and during calls, reporting what it spent. Real SDKs, local wire server."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tenure.executors import TaskContext
from tenure.executors.llm import LLMExecutor
from tenure.models import ChatMessage, ModelError, open_model
from tenure.models.stop import StopWhen, stopping
from tenure.protocol import TaskEnvelope, idempotency_key

from .conftest import ServerFactory
from .wire_server import WireServer, answer, error, slow

PROVIDERS = ["openai", "anthropic"]
ASK = [ChatMessage("user", "What does Acme cost?")]
MORE = {"status": "continue", "progress": "read one more page"}


def model_for(provider: str, server: WireServer, **options: Any) -> Any:
    url = server.openai_url if provider == "openai" else server.anthropic_url
    options.setdefault("timeout", 30.0)
    options.setdefault("max_retries", 3)
    return open_model(f"{provider}:test-model@{url}", **options)


def envelope(deadline: float) -> TaskEnvelope:
    return TaskEnvelope.model_validate(
        {
            "task_id": "slow",
            "idempotency_key": idempotency_key("slow", 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "w1",
            "deadline_seconds": deadline,
            "goal": "Read every page, then answer.",
        }
    )


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def calls(self) -> list[dict[str, Any]]:
        return [data for kind, data in self.events if kind == "model.call"]


def context(tmp_path: Path, log: Log, cancelled: threading.Event | None = None) -> TaskContext:
    return TaskContext(
        worker_id="w1",
        team="t",
        workdir=tmp_path,
        cancelled=cancelled or threading.Event(),
        record_event=lambda kind, data: log.events.append((kind, data)),
    )


# --- the adapters -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_deadline_cuts_the_request_short_and_no_retry_follows(
    wire: ServerFactory, provider: str, stream: bool
) -> None:
    server = wire([slow(5.0, {"price": 1})])
    model = model_for(provider, server, stream=stream)  # 30s timeout, 3 retries
    started = time.monotonic()
    with stopping(StopWhen(deadline=started + 0.5)), pytest.raises(ModelError) as caught:
        model.complete(ASK)
    assert caught.value.kind == "stopped"
    assert time.monotonic() - started < 2.0
    time.sleep(0.5)
    assert len(server.requests) == 1  # its retries did not start after the deadline


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cancelled_attempt_sends_nothing(wire: ServerFactory, provider: str) -> None:
    server = wire([answer({"price": 1})])
    cancelled = threading.Event()
    cancelled.set()
    with stopping(StopWhen(cancelled=cancelled)), pytest.raises(ModelError) as caught:
        model_for(provider, server).complete(ASK)
    assert caught.value.kind == "stopped" and "cancelled" in str(caught.value)
    assert server.requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_go_on_while_the_deadline_leaves_time(wire: ServerFactory, provider: str) -> None:
    server = wire([error(500, "busy"), answer({"price": 1})])
    with stopping(StopWhen(deadline=time.monotonic() + 20)):
        completion = model_for(provider, server).complete(ASK)
    assert completion.json() == {"price": 1}
    assert len(server.requests) == 2


# --- the LLM worker -----------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_timed_out_attempt_stops_calling_and_reports_its_spend(
    wire: ServerFactory, provider: str, tmp_path: Path
) -> None:
    server = wire([answer(MORE), answer(MORE), slow(10.0, MORE)])
    executor = LLMExecutor(model_for(provider, server), max_turns=10)
    log = Log()
    started = time.monotonic()
    result = executor.execute(envelope(1.5), context(tmp_path, log))
    ended = time.monotonic()
    assert result.status == "failed"
    assert result.notes.uncertain[0].startswith("stopped: the attempt's deadline passed")
    assert ended - started < 1.5 + 1.5  # the slow call was cut at the deadline
    # what the two calls that ended cost is in the result, as in the log
    assert result.usage is not None and result.usage.calls == 2
    calls = log.calls()
    assert len(calls) == 2
    assert result.usage.input_tokens == sum(c["input_tokens"] for c in calls) > 0
    assert "attempt.stopped" in log.kinds()
    time.sleep(1.0)
    assert len(server.requests) == 3
    assert all(at < started + 1.5 for at in server.times)  # no request after the deadline


def test_a_cancelled_attempt_stops_waiting_for_its_call_and_logs_it_when_it_ends(
    wire: ServerFactory, tmp_path: Path
) -> None:
    server = wire([answer(MORE), slow(1.0, MORE)])
    executor = LLMExecutor(model_for("openai", server), max_turns=10)
    log = Log()
    cancelled = threading.Event()
    threading.Timer(0.4, cancelled.set).start()
    started = time.monotonic()
    result = executor.execute(envelope(60), context(tmp_path, log, cancelled))
    assert time.monotonic() - started < 0.9  # not kept waiting for the slow answer
    assert result.notes.uncertain[0].startswith("stopped: the attempt was cancelled")
    assert result.usage is not None and result.usage.calls == 1
    deadline = time.monotonic() + 5
    while len(log.calls()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    late = log.calls()[-1]
    assert late.get("abandoned") is True and late["input_tokens"] > 0
    assert len(server.requests) == 2


def test_a_model_that_ignores_the_deadline_is_left_behind(tmp_path: Path) -> None:
    from tenure.models import ScriptedModel

    def dawdle(messages: list[ChatMessage]) -> dict[str, Any]:
        time.sleep(4.0)
        return {"status": "completed", "artifact": 1}

    log = Log()
    started = time.monotonic()
    result = LLMExecutor(ScriptedModel(dawdle)).execute(envelope(0.5), context(tmp_path, log))
    assert result.status == "failed"
    assert "deadline passed" in result.notes.uncertain[0]
    assert time.monotonic() - started < 0.5 + 1.0 + 1.0
