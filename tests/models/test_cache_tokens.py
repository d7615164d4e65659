"""Prompt-cache tokens are input the model read: counted in spend, priced at their own rates.

Anthropic reports them beside ``input_tokens`` (``cache_read_input_tokens``,
``cache_creation_input_tokens``), OpenAI inside ``prompt_tokens``
(``prompt_tokens_details.cached_tokens``). Through the real SDKs against the local
wire-format server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenure.executors import TaskContext
from tenure.executors.llm import LLMExecutor
from tenure.models import ChatMessage, Price, PriceTable, open_model
from tenure.models.pricing import DEFAULT_PRICES, parse_prices
from tenure.protocol import TaskEnvelope, idempotency_key

from .conftest import ServerFactory
from .wire_server import answer, with_usage, words

ASK = [ChatMessage("system", "Answer in JSON."), ChatMessage("user", "What does Acme cost?")]
PROMPT = sum(words(m.content) for m in ASK)
SONNET = DEFAULT_PRICES["claude-sonnet-4-5"]
GPT = DEFAULT_PRICES["gpt-4.1"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_cache_reads_and_writes_are_input_at_their_own_prices(
    wire: ServerFactory, stream: bool
) -> None:
    reply = with_usage(
        answer({"price": 29}), cache_read_input_tokens=28_478, cache_creation_input_tokens=1_200
    )
    server = wire([reply])
    model = open_model(
        f"anthropic:claude-sonnet-4-5@{server.anthropic_url}", stream=stream, max_retries=0
    )
    usage = model.complete(ASK, json_schema={"type": "object"}).usage
    assert usage.input_tokens == PROMPT + 28_478 + 1_200  # nothing read goes uncounted
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (28_478, 1_200)
    expected = (
        PROMPT * 3.0 + 28_478 * 0.30 + 1_200 * 3.75 + usage.output_tokens * 15.0
    ) / 1e6
    assert usage.cost_usd == pytest.approx(expected)
    assert SONNET.cache_read_per_mtok == pytest.approx(0.30)
    assert SONNET.cache_write_per_mtok == pytest.approx(3.75)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_cached_tokens_are_priced_at_the_cached_rate(
    wire: ServerFactory, stream: bool
) -> None:
    reply = with_usage(
        answer({"price": 29}),
        prompt_tokens=44_183,
        prompt_tokens_details={"cached_tokens": 28_478},
    )
    server = wire([reply])
    model = open_model(f"openai:gpt-4.1@{server.openai_url}", stream=stream, max_retries=0)
    usage = model.complete(ASK).usage
    assert usage.input_tokens == 44_183  # prompt_tokens already includes the cached ones
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (28_478, 0)
    expected = ((44_183 - 28_478) * 2.0 + 28_478 * 0.50 + usage.output_tokens * 8.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected)


def test_a_price_without_cache_rates_charges_cached_tokens_as_input() -> None:
    plain = Price(2.0, 8.0)
    assert plain.cost(1000, 0, cache_read=600, cache_write=100) == pytest.approx(1000 * 2.0 / 1e6)
    table = PriceTable(parse_prices({"m": {"input": 2, "output": 8, "cache_read": 0.5}}))
    price = table.price("openai", "m")
    assert price == Price(2.0, 8.0, 0.5, None)
    assert table.cost("openai", "m", 1000, 0, 600) == pytest.approx((400 * 2 + 600 * 0.5) / 1e6)
    assert parse_prices({"m": [1, 2]})["m"] == Price(1.0, 2.0)


def test_the_llm_worker_counts_cache_tokens_in_its_spend_and_its_events(
    wire: ServerFactory, tmp_path: Path
) -> None:
    done = {"status": "completed", "artifact": {"ok": True}}
    server = wire([with_usage(answer(done), cache_read_input_tokens=28_478)])
    model = open_model(f"anthropic:claude-sonnet-4-5@{server.anthropic_url}", max_retries=0)
    events: list[tuple[str, dict[str, Any]]] = []
    ctx = TaskContext(
        worker_id="w1",
        team="t",
        workdir=tmp_path,
        record_event=lambda kind, data: events.append((kind, data)),
    )
    env = TaskEnvelope.model_validate(
        {
            "task_id": "a",
            "idempotency_key": idempotency_key("a", 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "w1",
            "deadline_seconds": 30,
            "goal": "Say ok.",
        }
    )
    result = LLMExecutor(model).execute(env, ctx)
    assert result.status == "completed", result.notes
    assert result.usage is not None
    [(kind, call)] = events
    assert kind == "model.call"
    assert call["cache_read_tokens"] == 28_478
    assert result.usage.input_tokens == call["input_tokens"] > 28_478
    assert result.usage.cost_usd == pytest.approx(call["cost_usd"])
    uncached = call["input_tokens"] - 28_478
    expected = (uncached * 3.0 + 28_478 * 0.30 + call["output_tokens"] * 15.0) / 1e6
    assert call["cost_usd"] == pytest.approx(expected, rel=1e-6)
