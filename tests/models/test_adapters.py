"""Both adapters through the real SDKs against the local wire-format server."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tenure.models import ChatMessage, ModelError, ModelRequestRefused, open_model
from tenure.models.base import Model

from .conftest import ServerFactory
from .wire_server import answer, cut, cut_body, error, refusal, slow, text

PROVIDERS = ["openai", "anthropic"]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["price"],
    "properties": {"price": {"type": "number"}},
}
ASK = [ChatMessage("system", "Answer in JSON."), ChatMessage("user", "What does Acme cost?")]


def model_for(provider: str, server: Any, **options: Any) -> Model:
    url = server.openai_url if provider == "openai" else server.anthropic_url
    options.setdefault("max_retries", 2)
    options.setdefault("timeout", 5.0)
    return open_model(f"{provider}:test-model@{url}", **options)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_well_formed_structured_answer_comes_back_with_usage(
    wire: ServerFactory, provider: str, stream: bool
) -> None:
    server = wire([answer({"price": 29})])
    model = model_for(provider, server, stream=stream)
    completion = model.complete(ASK, json_schema=SCHEMA, max_tokens=200)
    assert completion.json() == {"price": 29}
    assert completion.refusal is None
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0
    assert (completion.provider, completion.model) == (provider, "test-model")
    request = server.requests[0]
    if provider == "openai":
        assert request["response_format"]["type"] == "json_schema"
        assert request["response_format"]["json_schema"]["schema"] == SCHEMA
        assert request["messages"][0] == {"role": "system", "content": "Answer in JSON."}
        assert request["max_tokens"] == 200
    else:
        assert request["tool_choice"] == {"type": "tool", "name": "answer"}
        assert request["tools"][0]["input_schema"] == SCHEMA
        assert request["system"] == "Answer in JSON."
        assert [m["role"] for m in request["messages"]] == ["user"]
        assert request["max_tokens"] == 200


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_json_is_returned_as_text_and_fails_to_parse(
    wire: ServerFactory, provider: str
) -> None:
    server = wire([text('{"price": 29,,')])
    completion = model_for(provider, server).complete(ASK)
    assert completion.text == '{"price": 29,,'
    with pytest.raises(ValueError):
        completion.json()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_is_reported_as_a_refusal(
    wire: ServerFactory, provider: str, stream: bool
) -> None:
    server = wire([refusal("I won't price competitors.")])
    completion = model_for(provider, server, stream=stream).complete(ASK, json_schema=SCHEMA)
    assert completion.refusal is not None
    assert "competitors" in completion.refusal


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_429_then_success_is_retried_by_the_sdk(wire: ServerFactory, provider: str) -> None:
    server = wire([error(429, "slow down"), answer({"price": 1})])
    completion = model_for(provider, server).complete(ASK, json_schema=SCHEMA)
    assert completion.json() == {"price": 1}
    assert len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_persistent_500_is_a_server_error_after_the_retries(
    wire: ServerFactory, provider: str
) -> None:
    server = wire([error(500, "boom")])
    with pytest.raises(ModelError) as caught:
        model_for(provider, server, max_retries=2).complete(ASK)
    assert caught.value.kind == "server"
    assert caught.value.status == 500 and caught.value.retryable
    assert "500" in str(caught.value) and "boom" in str(caught.value)
    assert len(server.requests) == 3  # the first try and two retries


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_429_that_never_ends_is_a_rate_limit_error(wire: ServerFactory, provider: str) -> None:
    server = wire([error(429, "quota")])
    with pytest.raises(ModelError) as caught:
        model_for(provider, server, max_retries=1).complete(ASK)
    assert caught.value.kind == "rate_limit"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_timeout_is_a_timeout_error(wire: ServerFactory, provider: str) -> None:
    server = wire([slow(3.0, {"price": 1})])
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        model_for(provider, server, timeout=0.3, max_retries=0).complete(ASK)
    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 2.5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_short_is_an_error_not_a_short_answer(
    wire: ServerFactory, provider: str
) -> None:
    server = wire([cut({"price": 29, "note": "a long enough answer to be split"})])
    with pytest.raises(ModelError) as caught:
        model_for(provider, server, stream=True).complete(ASK, json_schema=SCHEMA)
    assert caught.value.kind == "cut_short"
    assert "cut short" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_body_cut_short_is_a_connection_error(wire: ServerFactory, provider: str) -> None:
    server = wire([cut_body({"price": 29})])
    with pytest.raises(ModelError) as caught:
        model_for(provider, server, max_retries=0).complete(ASK, json_schema=SCHEMA)
    assert caught.value.retryable


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unreachable_server_is_a_connection_error(provider: str) -> None:
    from tenure.models import allow_model_requests

    with allow_model_requests("http://127.0.0.1:9"):
        model = open_model(f"{provider}:m@http://127.0.0.1:9", max_retries=0, timeout=2)
        with pytest.raises(ModelError) as caught:
            model.complete(ASK)
    assert caught.value.kind == "connection"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_guard_refuses_a_server_no_test_allowed(provider: str) -> None:
    model = open_model(f"{provider}:m@http://127.0.0.1:9", max_retries=0)
    with pytest.raises(ModelRequestRefused, match="refused: the test suite is running"):
        model.complete(ASK)


def test_cost_is_recorded_from_the_price_table(wire: ServerFactory) -> None:
    from tenure.models import Price, PriceTable

    server = wire([answer({"price": 1})])
    prices = PriceTable({"openai:test-model": Price(1_000_000.0, 2_000_000.0)})
    completion = model_for("openai", server, prices=prices).complete(ASK)
    usage = completion.usage
    assert completion.priced
    assert usage.cost_usd == pytest.approx(usage.input_tokens * 1.0 + usage.output_tokens * 2.0)


def test_an_unknown_model_costs_nothing_and_says_it_is_unpriced(wire: ServerFactory) -> None:
    server = wire([answer({"price": 1})])
    completion = model_for("openai", server).complete(ASK)
    assert completion.usage.cost_usd == 0.0
    assert not completion.priced
