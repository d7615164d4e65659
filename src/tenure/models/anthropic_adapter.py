"""Anthropic's Messages API through the official ``anthropic`` SDK.

Structured output is a forced tool call: the schema becomes the input schema of
a tool named ``answer`` and ``tool_choice`` makes the model call it, which works
on every Claude model and every SDK version since 0.34. The SDK retries 429,
5xx (including 529 overloaded), timeouts and lost connections with backoff.
"""

from __future__ import annotations

import json
import time
from typing import Any, Unpack

from tenure.models._sdk import SDKModel, SDKOptions, Tokens, as_int, count
from tenure.models.base import ChatMessage, Completion
from tenure.models.guard import check_request

ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
TOOL = "answer"


class AnthropicModel(SDKModel):
    package = "anthropic"
    client_class = "Anthropic"
    default_provider = "anthropic"
    default_url = ANTHROPIC_URL

    def __init__(
        self,
        model: str,
        *,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        **options: Unpack[SDKOptions],
    ) -> None:
        super().__init__(model, **options)
        self.default_max_tokens = default_max_tokens

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        check_request(self.provider, self.url)
        messages = self.outgoing(messages)
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": self.name,
            "max_tokens": max_tokens or self.default_max_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in messages if m.role != "system"
            ],
        }
        if system:
            kwargs["system"] = system
        wrapped = json_schema is not None and json_schema.get("type") != "object"
        if json_schema is not None:
            schema = (
                {"type": "object", "properties": {"value": json_schema}, "required": ["value"]}
                if wrapped
                else json_schema
            )
            kwargs["tools"] = [
                {
                    "name": TOOL,
                    "description": "Give your answer as this tool's input, exactly in its schema.",
                    "input_schema": schema,
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": TOOL}
        started = time.monotonic()
        with self.sdk_errors():
            read = self._streamed if self.stream else self._whole
            blocks, stop, tokens = self.send(lambda client: read(client, kwargs))
        text = _text_of(blocks, unwrap=wrapped)
        refusal = None
        if stop == "refusal":
            refusal = _plain_text(blocks) or "the model declined to answer"
        return self.completion(
            messages, text, tokens, refusal=refusal, finish=stop, started=started
        )

    def _whole(
        self, client: Any, kwargs: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str, Tokens]:
        response = client.messages.create(**kwargs)
        blocks: list[dict[str, Any]] = []
        for block in getattr(response, "content", None) or []:
            kind = getattr(block, "type", "")
            if kind == "text":
                blocks.append({"type": "text", "text": block.text})
            elif kind == "tool_use":
                blocks.append({"type": "tool_use", "input": block.input})
        usage = getattr(response, "usage", None)
        tokens = _tokens(usage, as_int(getattr(usage, "output_tokens", None)))
        return blocks, getattr(response, "stop_reason", None) or "", tokens

    def _streamed(
        self, client: Any, kwargs: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str, Tokens]:
        blocks: list[dict[str, Any]] = []
        stop, done = "", False
        started: Any = None  # the usage message_start reports (input and cache counts)
        tokens_out: Any = None
        stream = client.messages.create(**kwargs, stream=True)
        with self.reading(stream):
            for event in self.watched(stream):
                kind = getattr(event, "type", "")
                if kind == "message_start":
                    started = getattr(event.message, "usage", None)
                elif kind == "content_block_start":
                    block_type = getattr(event.content_block, "type", "text")
                    blocks.append({"type": block_type, "text": "", "json": ""})
                elif kind == "content_block_delta" and blocks:
                    delta = event.delta
                    if getattr(delta, "type", "") == "text_delta":
                        blocks[-1]["text"] += delta.text
                    elif getattr(delta, "type", "") == "input_json_delta":
                        blocks[-1]["json"] += delta.partial_json
                elif kind == "message_delta":
                    stop = getattr(event.delta, "stop_reason", None) or stop
                    tokens_out = as_int(getattr(event.usage, "output_tokens", None))
                    if as_int(getattr(event.usage, "input_tokens", None)) is not None:
                        started = event.usage  # newer servers give the final counts here
                elif kind == "message_stop":
                    done = True
        if not done:
            raise self.cut_short("it ended before message_stop")
        for block in blocks:
            if block["type"] == "tool_use":
                try:
                    block["input"] = json.loads(block["json"] or "{}")
                except ValueError:
                    block["input"] = None
                    block["raw"] = block["json"]
        return blocks, stop, _tokens(started, tokens_out)


def _tokens(usage: Any, output: int | None) -> Tokens:
    """Anthropic's counts: ``input_tokens`` leaves out the tokens read from the prompt
    cache (``cache_read_input_tokens``) and written to it (``cache_creation_input_tokens``);
    all three are input the model read, each at its own price."""
    uncached = as_int(getattr(usage, "input_tokens", None))
    read = count(getattr(usage, "cache_read_input_tokens", None))
    write = count(getattr(usage, "cache_creation_input_tokens", None))
    total = None if uncached is None else uncached + read + write
    return Tokens(total, output, read, write)


def _plain_text(blocks: list[dict[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b["type"] == "text")


def _text_of(blocks: list[dict[str, Any]], *, unwrap: bool) -> str:
    """The tool call's input as JSON text when there is one, else the text blocks."""
    for block in blocks:
        if block["type"] == "tool_use":
            if block.get("input") is None:
                return str(block.get("raw", ""))
            value = block["input"]
            if unwrap and isinstance(value, dict) and "value" in value:
                value = value["value"]
            return json.dumps(value)
    return _plain_text(blocks)
