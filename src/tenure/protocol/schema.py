"""JSON Schema of every message type, the envelope, the result and the plan."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tenure.protocol.envelope import TaskEnvelope, TaskResult
from tenure.protocol.errors import ProtocolError
from tenure.protocol.messages import MESSAGE_CLASSES
from tenure.protocol.plan import Plan

EXTRA_SCHEMAS: dict[str, type[BaseModel]] = {
    "envelope": TaskEnvelope,
    "result": TaskResult,
    "plan": Plan,
}


def schema_names() -> list[str]:
    return [*MESSAGE_CLASSES, *EXTRA_SCHEMAS]


def json_schema(name: str | None = None) -> dict[str, Any]:
    """The schema of one type, or ``{name: schema}`` for all when ``name`` is None."""
    if name is None:
        return {each: json_schema(each) for each in schema_names()}
    model = MESSAGE_CLASSES.get(name) or EXTRA_SCHEMAS.get(name)
    if model is None:
        raise ProtocolError("TYPE", f"one of {', '.join(schema_names())}; got {name!r}")
    return model.model_json_schema(by_alias=True, mode="validation")
