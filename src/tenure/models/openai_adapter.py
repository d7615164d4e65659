"""OpenAI-compatible chat completions through the official ``openai`` SDK.

One adapter for every server that speaks ``POST /v1/chat/completions``:
OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, OpenRouter and
others; only the base URL changes. Structured output uses ``response_format``
``json_schema``. The SDK does the retries (exponential backoff with jitter on
429, 5xx, timeouts and lost connections, honouring ``retry-after``); whatever
is left after them becomes a :class:`ModelError`.
"""

from __future__ import annotations

import time
from typing import Any

from tenure.models._sdk import as_int, import_sdk, translate_error, usage_of
from tenure.models.base import ChatMessage, Completion
from tenure.models.errors import ModelError
from tenure.models.guard import check_request
from tenure.models.pricing import PriceTable

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIModel:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        stream: bool = False,
        prices: PriceTable | None = None,
        provider: str = "openai",
    ) -> None:
        self.sdk = import_sdk("openai", "openai")
        self.name = model
        self.provider = provider
        self.base_url = base_url
        self.stream = stream
        self.prices = prices
        self.client: Any = self.sdk.OpenAI(
            api_key=api_key or "not-needed",  # local servers ignore it; the SDK wants one
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def url(self) -> str:
        return self.base_url or OPENAI_URL

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        check_request(self.provider, self.url)
        kwargs: dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": json_schema, "strict": False},
            }
        if max_tokens is not None:
            # OpenAI's newer models only take max_completion_tokens; other servers max_tokens
            kwargs["max_tokens" if self.base_url else "max_completion_tokens"] = max_tokens
        started = time.monotonic()
        try:
            if self.stream:
                text, finish, refusal, tokens = self._streamed(kwargs)
            else:
                text, finish, refusal, tokens = self._whole(kwargs)
        except ModelError:
            raise
        except self.sdk.APIError as exc:
            raise translate_error(self.sdk, exc, self.provider, self.name, self.url) from None
        if finish == "content_filter" and refusal is None:
            refusal = "the server's content filter stopped the answer"
        usage, priced = usage_of(
            self.prices, self.provider, self.name, tokens[0], tokens[1], messages, text
        )
        return Completion(
            text,
            usage,
            self.name,
            self.provider,
            refusal=refusal,
            finish_reason=finish,
            seconds=time.monotonic() - started,
            priced=priced,
        )

    def _whole(self, kwargs: dict[str, Any]) -> tuple[str, str, str | None, tuple[Any, Any]]:
        response = self.client.chat.completions.create(**kwargs)
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(
                "the answer has no choices", kind="empty", provider=self.provider, model=self.name
            )
        message = choices[0].message
        usage = getattr(response, "usage", None)
        tokens = (
            as_int(getattr(usage, "prompt_tokens", None)),
            as_int(getattr(usage, "completion_tokens", None)),
        )
        refusal = getattr(message, "refusal", None) or None
        return message.content or "", choices[0].finish_reason or "", refusal, tokens

    def _streamed(self, kwargs: dict[str, Any]) -> tuple[str, str, str | None, tuple[Any, Any]]:
        parts: list[str] = []
        refusals: list[str] = []
        finish = ""
        tokens: tuple[Any, Any] = (None, None)
        stream = self.client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        try:
            for chunk in stream:
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    tokens = (
                        as_int(getattr(usage, "prompt_tokens", None)),
                        as_int(getattr(usage, "completion_tokens", None)),
                    )
                for choice in getattr(chunk, "choices", None) or []:
                    delta = choice.delta
                    if getattr(delta, "content", None):
                        parts.append(delta.content)
                    if getattr(delta, "refusal", None):
                        refusals.append(delta.refusal)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except self.sdk.APIError:
            raise
        except Exception as exc:  # the connection dropped mid-stream (httpx errors)
            raise ModelError(
                f"the stream was cut short: {type(exc).__name__}: {exc}",
                kind="cut_short",
                provider=self.provider,
                model=self.name,
            ) from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if not finish:
            raise ModelError(
                "the stream was cut short: it ended without a finish reason",
                kind="cut_short",
                provider=self.provider,
                model=self.name,
            )
        return "".join(parts), finish, "".join(refusals) or None, tokens

    def __repr__(self) -> str:
        return f"OpenAIModel({self.provider}:{self.name} at {self.url})"
