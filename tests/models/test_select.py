"""Choosing a model by a string, prices, and the test guard: every mistake is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tenure.models import (
    ModelRequestRefused,
    ModelSpec,
    Price,
    PriceTable,
    allow_model_requests,
    default_prices,
    guard,
    model_spec,
    open_model,
    parse_model_spec,
)
from tenure.models._sdk import import_sdk
from tenure.protocol import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("openai:gpt-4.1", ModelSpec("openai", "gpt-4.1")),
        ("anthropic:claude-sonnet-4-5", ModelSpec("anthropic", "claude-sonnet-4-5")),
        (
            "openai:qwen2.5@http://localhost:8000/v1",
            ModelSpec("openai", "qwen2.5", "http://localhost:8000/v1"),
        ),
        ("ollama:llama3.1:8b", ModelSpec("ollama", "llama3.1:8b", "http://localhost:11434/v1")),
        ("vllm:qwen2.5", ModelSpec("vllm", "qwen2.5", "http://localhost:8000/v1")),
        ("OpenAI:gpt-4o", ModelSpec("openai", "gpt-4o")),
    ],
)
def test_model_strings(text: str, expected: ModelSpec) -> None:
    assert parse_model_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4.1", "TENURE_MODEL='gpt-4.1' is not a model: use PROVIDER:MODEL"),
        ("foo:bar", "unknown model provider 'foo' in TENURE_MODEL='foo:bar': use one of openai"),
        ("openai:", "is not a model"),
        ("openai:m@localhost:8000", "the part after '@' must be an http(s) base URL"),
        ("openai:@http://h:1/v1", "names no model"),
    ],
)
def test_bad_model_strings_are_one_line_saying_what_to_set(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_flag_wins_over_tenure_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_MODEL", "anthropic:claude-sonnet-4-5")
    assert model_spec("openai:gpt-4.1").provider == "openai"
    assert model_spec(None).provider == "anthropic"


def test_no_model_configured() -> None:
    with pytest.raises(ConfigError, match="no model configured: set TENURE_MODEL"):
        model_spec(None)


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openrouter:meta/llama", "OPENROUTER_API_KEY"),
    ],
)
def test_a_missing_key_names_its_variable(spec: str, variable: str) -> None:
    with pytest.raises(ConfigError, match=f"{variable} is not set: export it"):
        open_model(spec)


def test_keys_come_from_the_usual_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = open_model("openai:gpt-4.1")
    assert model.client.api_key == "sk-from-env"  # type: ignore[attr-defined]


def test_a_local_server_needs_no_key() -> None:
    model = open_model("openai:qwen2.5@http://localhost:8000/v1")
    assert (model.provider, model.name) == ("openai", "qwen2.5")


def test_timeout_and_retries_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_MODEL_TIMEOUT", "7.5")
    monkeypatch.setenv("TENURE_MODEL_RETRIES", "1")
    model = open_model("ollama:m")
    assert model.client.max_retries == 1  # type: ignore[attr-defined]
    monkeypatch.setenv("TENURE_MODEL_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="TENURE_MODEL_TIMEOUT='soon' is not a number"):
        open_model("ollama:m")


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("TENURE_MODEL_RETRIES", "inf", "TENURE_MODEL_RETRIES='inf': a number from 0 to 20"),
        ("TENURE_MODEL_RETRIES", "1e30", "TENURE_MODEL_RETRIES='1e30': a number from 0 to 20"),
        ("TENURE_MODEL_TIMEOUT", "nan", "TENURE_MODEL_TIMEOUT='nan': a number from 0 to 3600"),
        ("TENURE_MODEL_TIMEOUT", "-1", "TENURE_MODEL_TIMEOUT='-1': a number from 0 to 3600"),
    ],
)
def test_a_timeout_or_retry_count_out_of_range_is_one_line(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as raised:
        open_model("ollama:m")
    assert str(raised.value) == says


def test_a_missing_sdk_says_which_extra_to_install() -> None:
    with pytest.raises(ConfigError, match=r"pip install 'tenure\[nothing\]'"):
        import_sdk("tenure_no_such_sdk", "nothing")


# --- prices ---------------------------------------------------------------------------------


def test_prices_match_exact_provider_and_dated_names() -> None:
    table = PriceTable()
    assert table.price("openai", "gpt-4.1") == Price(2.0, 8.0, 0.50, 2.0)
    assert table.price("openai", "gpt-4.1-mini-2025-04-14") == Price(0.40, 1.60, 0.10, 0.40)
    assert table.price("anthropic", "claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.3, 3.75)
    assert table.price("openai", "my-local-model") is None
    assert table.cost("openai", "gpt-4.1", 1_000_000, 1_000_000) == pytest.approx(10.0)


def test_a_price_file_overrides_and_extends_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text('gpt-4.1: {input: 1.0, output: 2.0}\n"openai:qwen2.5": [0, 0]\n')
    monkeypatch.setenv("TENURE_PRICES", str(path))
    table = default_prices()
    assert table.price("openai", "gpt-4.1") == Price(1.0, 2.0)
    assert table.price("openai", "qwen2.5") == Price(0.0, 0.0)
    assert table.price("vllm", "qwen2.5") is None  # another provider's entry
    json_path = tmp_path / "prices.json"
    json_path.write_text(json.dumps({"gpt-4.1": {"input": 3, "output": 4}}))
    assert PriceTable.load(json_path).price("openai", "gpt-4.1") == Price(3.0, 4.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4.1: cheap\n", "gpt-4.1: two prices >= 0"),
        ("- a\n", "a mapping of model"),
        ("gpt-4.1: [1, -2]\n", "two prices >= 0"),
    ],
)
def test_a_bad_price_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        PriceTable.load(path)


# --- the guard ------------------------------------------------------------------------------


def test_the_guard_refuses_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelRequestRefused):
        guard.check_request("openai", "https://api.openai.com/v1")
    with allow_model_requests("http://127.0.0.1:8000"):
        guard.check_request("openai", "http://127.0.0.1:8000/v1")
        with pytest.raises(ModelRequestRefused):
            guard.check_request("openai", "http://127.0.0.1:8001/v1")
    monkeypatch.setenv(guard.ENV_ALLOW, "http://localhost:1234")
    guard.check_request("openai", "http://localhost:1234/v1")
    monkeypatch.setenv(guard.ENV_ALLOW, "1")
    guard.check_request("anthropic", "https://api.anthropic.com")


def test_the_guard_is_on_whenever_pytest_runs_a_test(monkeypatch: pytest.MonkeyPatch) -> None:
    guard.set_enforced(None)  # back to the environment's say
    assert "PYTEST_CURRENT_TEST" in __import__("os").environ
    assert guard.enforcing()
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    assert not guard.enforcing()
