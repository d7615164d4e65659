"""Talking to language models: one small interface, adapters behind it.

``open_model("openai:gpt-4.1")`` (or ``TENURE_MODEL``) gives an adapter on the
official SDK (installed with ``tenure[openai]`` / ``tenure[anthropic]``, imported
only when used); ``ScriptedModel`` answers from a script for tests and examples.
"""

from tenure.models.base import ChatMessage, Completion, Model, Usage
from tenure.models.errors import ModelError, ModelRequestRefused
from tenure.models.guard import allow_model_requests
from tenure.models.pricing import Price, PriceTable, default_prices
from tenure.models.scripted import ScriptedModel, count_tokens
from tenure.models.select import (
    ENV_MODEL,
    ModelSpec,
    check_reachable,
    model_spec,
    open_model,
    parse_model_spec,
)

__all__ = [
    "ENV_MODEL",
    "ChatMessage",
    "Completion",
    "Model",
    "ModelError",
    "ModelRequestRefused",
    "ModelSpec",
    "Price",
    "PriceTable",
    "ScriptedModel",
    "Usage",
    "allow_model_requests",
    "check_reachable",
    "count_tokens",
    "default_prices",
    "model_spec",
    "open_model",
    "parse_model_spec",
]
