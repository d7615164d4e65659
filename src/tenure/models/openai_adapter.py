"""OpenAI-compatible chat completions through the official ``openai`` SDK.

One adapter for every server that speaks ``POST /v1/chat/completions``:
OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, OpenRouter and
others; only the base URL changes. Structured output uses ``response_format``
``json_schema``; a server that refuses it (llama-cpp-python answers HTTP 500) is
asked once more with ``json_object`` and the schema in the prompt, which is then
used for that model for the rest of the run (a warning line says so, and the
completion's ``fallback`` too, for the caller's event log). Until a server has
answered one ``json_schema`` request, that request goes without the SDK's retries,
so a refusal falls back at once instead of after every retry of the same refused
form; a busy server (429, a timeout) is then asked again with the retries it had
left. The SDK does the retries (exponential backoff with jitter on
429, 5xx, timeouts and lost connections, honouring ``retry-after``); whatever
is left after them becomes a :class:`ModelError`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Any

from tenure.models._sdk import SDK_RETRIED, SDKModel, Tokens, as_int, count
from tenure.models.base import ChatMessage, Completion
from tenure.models.errors import ModelError
from tenure.models.guard import check_request
from tenure.protocol.secrets import redact_url

OPENAI_URL = "https://api.openai.com/v1"
JSON_OBJECT: dict[str, Any] = {"type": "json_object"}
REFUSED_FORM = frozenset({400, 422, 500, 501})
"""Statuses with which servers refuse a ``response_format`` they do not support
(llama-cpp-python answers 500 to ``json_schema``; others 400, 422 or 501)."""

log = logging.getLogger("tenure.models")
_lock = threading.Lock()
_json_schema_refused: dict[tuple[str, str], str] = {}  # (url, model) -> what was said
_json_schema_answered: set[tuple[str, str]] = set()  # (url, model) that took json_schema


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
        sent = self.outgoing(messages)
        if json_schema is None:
            return self._complete(sent, None, max_tokens)
        prompted = self.outgoing(_schema_in_prompt(messages, json_schema))
        key = (self.url, self.name)
        with _lock:
            refused = _json_schema_refused.get(key)
            known = key in _json_schema_answered
        if refused is not None:  # this server said no before: the next form straight away
            return self._complete(prompted, JSON_OBJECT, max_tokens)
        structured = _json_schema(json_schema)
        try:  # the first time, no retries: a refusal is not worth repeating
            completion = self._complete(sent, structured, max_tokens, retries=known)
        except ModelError as exc:
            if exc.status in REFUSED_FORM:
                first = exc
            elif known or exc.kind not in SDK_RETRIED or self.max_retries == 0:
                raise
            else:  # busy or away, not a refusal: the retries it was not given
                retried = self._complete(
                    sent, structured, max_tokens, retries=True, spent=1
                )
                return self._answered(key, retried)
        else:
            return self._answered(key, completion)
        said = (
            f"{self.provider}:{self.name} at {redact_url(self.url)} refused structured output "
            f"(response_format json_schema: HTTP {first.status}); falling back to json_object "
            "with the schema in the prompt for the rest of the run"
        )
        log.warning("%s", said)
        try:
            completion = self._complete(prompted, JSON_OBJECT, max_tokens)
        except ModelError as exc:
            raise ModelError(
                f"json_schema was refused (HTTP {first.status}), and json_object too: {exc}",
                kind=exc.kind,
                provider=self.provider,
                model=self.name,
                status=exc.status,
            ) from None
        with _lock:
            _json_schema_refused[key] = said
        return replace(completion, fallback=said)

    @staticmethod
    def _answered(key: tuple[str, str], completion: Completion) -> Completion:
        """This server takes ``json_schema``: its later requests get the SDK's retries."""
        with _lock:
            _json_schema_answered.add(key)
        return completion

    def _complete(
        self,
        messages: list[ChatMessage],
        response_format: dict[str, Any] | None,
        max_tokens: int | None,
        *,
        retries: bool = True,
        spent: int = 0,
    ) -> Completion:
        """One request; ``retries`` False: none of the SDK's, ``spent``: that many tries
        were made already (the retries are what is left of the model's)."""
        kwargs: dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if response_format is not None:
            kwargs["response_format"] = response_format
        if max_tokens is not None:
            # OpenAI's newer models only take max_completion_tokens; other servers max_tokens
            kwargs["max_tokens" if self.base_url else "max_completion_tokens"] = max_tokens
        started = time.monotonic()
        with self.sdk_errors():
            read = self._streamed if self.stream else self._whole
            limit = max(0, self.max_retries - spent) if retries else 0
            text, finish, refusal, tokens = self.send(
                lambda client: read(client, kwargs), max_retries=limit
            )
        if finish == "content_filter" and refusal is None:
            refusal = "the server's content filter stopped the answer"
        return self.completion(
            messages, text, tokens, refusal=refusal, finish=finish, started=started
        )

    def _whole(self, client: Any, kwargs: dict[str, Any]) -> tuple[str, str, str | None, Tokens]:
        response = client.chat.completions.create(**kwargs)
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(
                "the answer has no choices", kind="empty", provider=self.provider, model=self.name
            )
        message = choices[0].message
        tokens = _tokens(getattr(response, "usage", None))
        refusal = getattr(message, "refusal", None) or None
        return message.content or "", choices[0].finish_reason or "", refusal, tokens

    def _streamed(
        self, client: Any, kwargs: dict[str, Any]
    ) -> tuple[str, str, str | None, Tokens]:
        parts: list[str] = []
        refusals: list[str] = []
        finish = ""
        tokens = Tokens()
        stream = client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        with self.reading(stream):
            for chunk in self.watched(stream):
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


def _json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": False},
    }


def _schema_in_prompt(messages: list[ChatMessage], schema: dict[str, Any]) -> list[ChatMessage]:
    """The conversation with the schema stated in its system message, for ``json_object``
    (which asks only for some JSON object). The caller still validates the answer."""
    rule = (
        "Reply with one JSON object that matches this JSON Schema, and nothing else:\n"
        f"```json\n{json.dumps(schema, indent=2)}\n```"
    )
    if messages and messages[0].role == "system":
        first = ChatMessage("system", f"{messages[0].content}\n\n{rule}")
        return [first, *messages[1:]]
    return [ChatMessage("system", rule), *messages]


def forget_refusals() -> None:
    """Forget which servers refused ``json_schema`` (tests; a new run in one process)."""
    with _lock:
        _json_schema_refused.clear()
        _json_schema_answered.clear()
