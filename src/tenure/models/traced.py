"""A model call inside its ``chat`` span: every caller (LLM workers, judges, the
planner) asks a model through :func:`complete`, so each call is traced alike."""

from __future__ import annotations

from typing import Any

from tenure import observe
from tenure.models.base import ChatMessage, Completion, Model


def complete(
    model: Model,
    messages: list[ChatMessage],
    *,
    json_schema: dict[str, Any] | None = None,
    max_tokens: int | None = None,
) -> Completion:
    """``model.complete(...)``, with its usage on a ``chat {model}`` span."""
    with observe.chat(model.provider, model.name, max_tokens=max_tokens) as span:
        completion = model.complete(messages, json_schema=json_schema, max_tokens=max_tokens)
        observe.usage(
            span,
            input_tokens=completion.usage.input_tokens,
            output_tokens=completion.usage.output_tokens,
            model=completion.model,
            finish_reason=completion.finish_reason,
            cost_usd=completion.usage.cost_usd,
        )
        if completion.refusal:
            span.fail("refusal", completion.refusal)
    return completion
