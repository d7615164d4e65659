"""The model interface: messages in, text (or JSON) and usage out.

Small on purpose, so an OpenAI-compatible server, Anthropic's API and a
scripted test double all fit behind it. Judges, LLM workers and the planner
talk to models only through this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tenure.protocol.limits import MAX_PLAN_BYTES, decode_json

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class Usage:
    """What one call (or several, added up) cost.

    ``input_tokens`` counts every token the model read, those served from a prompt
    cache included: ``cache_read_tokens`` of them were read from the cache and
    ``cache_write_tokens`` written to it (each priced at its own rate in ``cost_usd``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Completion:
    """One model answer: its text, what it cost, and which model said it.

    ``refusal`` is set when the model declined (a refusal field, a content filter, a
    ``refusal`` stop reason); ``finish_reason`` is the provider's own word for why
    it stopped (``stop``, ``length``, ``tool_use``...), ``seconds`` the call's wall time;
    ``priced`` is False when the price table did not know the model (cost recorded as 0);
    ``fallback`` says so when the server refused the structured-output form asked for
    and this call fell back to the next one it supports (set on that call only).
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    provider: str = ""
    refusal: str | None = None
    finish_reason: str = ""
    seconds: float = 0.0
    priced: bool = True
    fallback: str | None = None

    def json(self) -> Any:
        """The text parsed as JSON (a ```json fence is tolerated); ValueError if not JSON."""
        text = self.text.strip()
        if text.startswith("```"):
            text = text.split("\n", 1)[1] if "\n" in text else ""
            text = text.rsplit("```", 1)[0]
        return decode_json(text, field="(answer)", limit=MAX_PLAN_BYTES)


class Model(Protocol):
    """Anything that can answer a conversation."""

    name: str
    provider: str

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion: ...
