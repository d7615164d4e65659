"""Talking to language models: one small interface, adapters behind it."""

from tenure.models.base import ChatMessage, Completion, Model, Usage
from tenure.models.scripted import ScriptedModel, count_tokens

__all__ = ["ChatMessage", "Completion", "Model", "ScriptedModel", "Usage", "count_tokens"]
