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

from tenure.models._sdk import SDKModel, Tokens, as_int, count
from tenure.models.base import ChatMessage, Completion
from tenure.models.errors import ModelError
from tenure.models.guard import check_request

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIModel(SDKModel):
    package = "openai"
    client_class = "OpenAI"
    default_provider = "openai"
    default_url = OPENAI_URL

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        check_request(self.provider, self.url)
        messages = self.outgoing(messages)
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
        with self.sdk_errors():
            if self.stream:
                text, finish, refusal, tokens = self._streamed(kwargs)
            else:
                text, finish, refusal, tokens = self._whole(kwargs)
        if finish == "content_filter" and refusal is None:
            refusal = "the server's content filter stopped the answer"
        return self.completion(
            messages, text, tokens, refusal=refusal, finish=finish, started=started
        )

    def _whole(self, kwargs: dict[str, Any]) -> tuple[str, str, str | None, Tokens]:
        response = self.client.chat.completions.create(**kwargs)
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(
                "the answer has no choices", kind="empty", provider=self.provider, model=self.name
            )
        message = choices[0].message
        tokens = _tokens(getattr(response, "usage", None))
        refusal = getattr(message, "refusal", None) or None
        return message.content or "", choices[0].finish_reason or "", refusal, tokens

    def _streamed(self, kwargs: dict[str, Any]) -> tuple[str, str, str | None, Tokens]:
        parts: list[str] = []
        refusals: list[str] = []
        finish = ""
        tokens = Tokens()
        stream = self.client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        with self.reading(stream):
            for chunk in stream:
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    tokens = _tokens(usage)
                for choice in getattr(chunk, "choices", None) or []:
                    delta = choice.delta
                    if getattr(delta, "content", None):
                        parts.append(delta.content)
                    if getattr(delta, "refusal", None):
                        refusals.append(delta.refusal)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        if not finish:
            raise self.cut_short("it ended without a finish reason")
        return "".join(parts), finish, "".join(refusals) or None, tokens


def _tokens(usage: Any) -> Tokens:
    """OpenAI's counts: ``prompt_tokens`` includes the ``cached_tokens`` read from the
    prompt cache (``prompt_tokens_details``), which are priced at the cached rate."""
    details = getattr(usage, "prompt_tokens_details", None)
    if isinstance(details, dict):
        cached = details.get("cached_tokens")
    else:
        cached = getattr(details, "cached_tokens", None)
    return Tokens(
        as_int(getattr(usage, "prompt_tokens", None)),
        as_int(getattr(usage, "completion_tokens", None)),
        count(cached),
    )
