"""Choosing a model by a string: ``provider:model[@base_url]``.

Examples::

    openai:gpt-4.1                              OpenAI, key from OPENAI_API_KEY
    anthropic:claude-sonnet-4-5                 Anthropic, key from ANTHROPIC_API_KEY
    openai:qwen2.5@http://localhost:8000/v1     any OpenAI-compatible server (vLLM, ...)
    ollama:llama3.1                             = openai:llama3.1@http://localhost:11434/v1

The string comes from a task's executor spec (``llm:openai:gpt-4.1``), a
``--model`` flag, or ``TENURE_MODEL``, in that order. Every problem is one
``ConfigError`` line saying what to set, raised before any work starts.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from tenure.models.base import Model
from tenure.models.pricing import PriceTable
from tenure.protocol.errors import ConfigError
from tenure.protocol.secrets import redact_url

ENV_MODEL = "TENURE_MODEL"
ENV_TIMEOUT = "TENURE_MODEL_TIMEOUT"
ENV_RETRIES = "TENURE_MODEL_RETRIES"
ENV_STREAM = "TENURE_MODEL_STREAM"
EXAMPLES = "openai:gpt-4.1, anthropic:claude-sonnet-4-5 or openai:MODEL@http://localhost:8000/v1"


@dataclass(frozen=True)
class Provider:
    """How to reach one provider: the adapter, its key variable, its default base URL."""

    adapter: str  # "openai" or "anthropic": the wire format
    key_env: str | None
    base_url: str | None = None
    key_required: bool = True


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", "OPENAI_API_KEY"),
    "anthropic": Provider("anthropic", "ANTHROPIC_API_KEY"),
    "openrouter": Provider("openai", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
    "ollama": Provider("openai", None, "http://localhost:11434/v1", key_required=False),
    "vllm": Provider("openai", None, "http://localhost:8000/v1", key_required=False),
    "lmstudio": Provider("openai", None, "http://localhost:1234/v1", key_required=False),
    "llamacpp": Provider("openai", None, "http://localhost:8080/v1", key_required=False),
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model string."""

    provider: str
    model: str
    base_url: str | None = None

    @property
    def adapter(self) -> str:
        return PROVIDERS[self.provider].adapter

    def __str__(self) -> str:
        at = f"@{self.base_url}" if self.base_url else ""
        return f"{self.provider}:{self.model}{at}"


def parse_model_spec(text: str, *, source: str = ENV_MODEL) -> ModelSpec:
    """``provider:model[@base_url]`` -> ModelSpec; ConfigError naming ``source`` if malformed."""
    text = text.strip()
    provider, colon, rest = text.partition(":")
    provider = provider.lower()
    if not colon or not provider or not rest:
        raise ConfigError(f"{source}={text!r} is not a model: use PROVIDER:MODEL, e.g. {EXAMPLES}")
    if provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise ConfigError(
            f"unknown model provider {provider!r} in {source}={text!r}: use one of {known} "
            f"(any OpenAI-compatible server: openai:MODEL@BASE_URL)"
        )
    model, base_url = rest, None
    if "@" in rest:
        model, _, base_url = rest.rpartition("@")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"{source}={text!r}: the part after '@' must be an http(s) base URL, "
                f"e.g. openai:{model or 'MODEL'}@http://localhost:8000/v1"
            )
    if not model:
        raise ConfigError(f"{source}={text!r} names no model: use {provider}:MODEL")
    return ModelSpec(provider, model, base_url or PROVIDERS[provider].base_url)


def model_spec(flag: str | None = None, *, source: str = "--model") -> ModelSpec:
    """The model named by ``flag``, else by ``TENURE_MODEL``; ConfigError if neither."""
    if flag:
        return parse_model_spec(flag, source=source)
    env = os.environ.get(ENV_MODEL, "").strip()
    if env:
        return parse_model_spec(env, source=ENV_MODEL)
    raise ConfigError(f"no model configured: set {ENV_MODEL} (e.g. {EXAMPLES}) or pass --model")


def open_model(
    spec: str | ModelSpec | None = None,
    *,
    timeout: float | None = None,
    max_retries: int | None = None,
    stream: bool | None = None,
    prices: PriceTable | None = None,
) -> Model:
    """An adapter for ``spec`` (or ``TENURE_MODEL``), checked for SDK and key, not yet called.

    Timeout (seconds per request), SDK retries on 429/5xx/timeouts and streaming
    default to ``TENURE_MODEL_TIMEOUT`` (60), ``TENURE_MODEL_RETRIES`` (3) and
    ``TENURE_MODEL_STREAM`` (off).
    """
    parsed = spec if isinstance(spec, ModelSpec) else model_spec(spec, source="model")
    provider = PROVIDERS[parsed.provider]
    key = _api_key(parsed, provider)
    timeout = timeout if timeout is not None else _env_float(ENV_TIMEOUT, 60.0, 3600.0)
    retries = max_retries if max_retries is not None else int(_env_float(ENV_RETRIES, 3, 20))
    streaming = stream if stream is not None else os.environ.get(ENV_STREAM, "") in ("1", "true")
    common = {
        "base_url": parsed.base_url,
        "api_key": key,
        "timeout": timeout,
        "max_retries": retries,
        "stream": streaming,
        "prices": prices,
        "provider": parsed.provider,
    }
    if provider.adapter == "anthropic":
        from tenure.models.anthropic_adapter import AnthropicModel

        return AnthropicModel(parsed.model, **common)  # type: ignore[arg-type]
    from tenure.models.openai_adapter import OpenAIModel

    return OpenAIModel(parsed.model, **common)  # type: ignore[arg-type]


def api_key(spec: ModelSpec) -> str | None:
    """The key ``spec`` is used with (from its provider's variable), None where a local
    server needs none; ConfigError naming the variable when a hosted API lacks it."""
    return _api_key(spec, PROVIDERS[spec.provider])


def _api_key(spec: ModelSpec, provider: Provider) -> str | None:
    if provider.key_env is None:
        return None
    key = os.environ.get(provider.key_env, "").strip()
    if key:
        return key
    custom_base = spec.base_url is not None and spec.base_url != provider.base_url
    if provider.key_required and not custom_base:
        raise ConfigError(
            f"{provider.key_env} is not set: export it to use {spec.provider}:{spec.model}"
            + (
                " (a local OpenAI-compatible server needs none: openai:MODEL@BASE_URL)"
                if provider.adapter == "openai"
                else ""
            )
        )
    return None


def _env_float(name: str, default: float, ceiling: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not 0 <= value <= ceiling:  # inf and nan too: a retry count or timeout is finite
        raise ConfigError(f"{name}={raw!r}: a number from 0 to {ceiling:g}")
    return value


def check_reachable(model: Model, *, timeout: float = 3.0) -> None:
    """One TCP connect to the model's base URL; ConfigError saying what to fix if it fails.

    Hosted APIs without a custom base URL are not probed (no request is sent anyway)."""
    base_url = getattr(model, "base_url", None)
    if not base_url:
        return
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        if isinstance(exc, TimeoutError | socket.timeout):
            why = f"no answer in {timeout:g}s"
        raise ConfigError(
            f"cannot reach the model server at {redact_url(base_url)} ({why}): start it, or set "
            f"{ENV_MODEL} / --model to a reachable PROVIDER:MODEL@BASE_URL"
        ) from None
