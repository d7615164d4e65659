"""The model's answer: its JSON Schema, and the validation that makes it a result.

Validation says exactly what is wrong, because the message is shown to the model for
its one repair.
"""

from __future__ import annotations

from typing import Any

from tenure.models import Completion
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult

FINAL_STATUSES = ("completed", "blocked", "refused", "failed")


class InvalidAnswer(ValueError):
    """The model's answer is not a valid result; the message says why, for the repair."""


def result_schema(
    envelope: TaskEnvelope, *, more_turns: bool = False, with_artifact: bool = True
) -> dict[str, Any]:
    """The JSON Schema of the model's answer (structured output and validation).

    ``with_artifact=False`` leaves the artifact open: validation checks it against the
    task's output schema separately, only when the status is ``completed``."""
    statuses = [*FINAL_STATUSES, "continue"] if more_turns else list(FINAL_STATUSES)
    strings = {"type": "array", "items": {"type": "string"}}
    artifact: dict[str, Any] = (
        {"anyOf": [envelope.output_schema, {"type": "null"}]}
        if envelope.output_schema is not None and with_artifact
        else {}
    )
    properties: dict[str, Any] = {
        "status": {"type": "string", "enum": statuses},
        "artifact": artifact,
        "notes": {
            "type": "object",
            "properties": {"changed": strings, "verified": strings, "uncertain": strings},
            "additionalProperties": False,
        },
        "evidence": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["source"],
                "properties": {
                    "source": {"type": "string"},
                    "field": {"type": ["string", "null"]},
                },
                "additionalProperties": False,
            },
        },
        "question": {"type": ["string", "null"]},
        "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    }
    if more_turns:
        properties["progress"] = {"type": "string"}
    return {
        "type": "object",
        "required": ["status"],
        "properties": properties,
        "additionalProperties": False,
    }


def validate_answer(
    text: str, envelope: TaskEnvelope, *, more_turns: bool = False
) -> dict[str, Any]:
    """The model's answer as a dict, or InvalidAnswer saying exactly what is wrong."""
    try:
        value = Completion(text).json()
    except ValueError as exc:
        raise InvalidAnswer(f"it is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidAnswer(f"it is a JSON {type(value).__name__}, not an object")
    _validate(value, result_schema(envelope, more_turns=more_turns, with_artifact=False), "")
    status = value["status"]
    if status == "completed" and envelope.output_schema is not None:
        _validate(value.get("artifact"), envelope.output_schema, "/artifact")
    if status == "blocked" and not value.get("question"):
        raise InvalidAnswer('status "blocked" needs a "question" saying what you need')
    if status in ("refused", "failed") and not (value.get("notes") or {}).get("uncertain"):
        raise InvalidAnswer(f'status "{status}" needs the reason in notes.uncertain')
    if status != "continue":
        try:
            probe = {k: v for k, v in value.items() if k not in ("evidence", "progress")}
            TaskResult.model_validate(
                {
                    **probe,
                    "task_id": envelope.task_id,
                    "idempotency_key": envelope.idempotency_key,
                    "epoch": envelope.epoch,
                }
            )
        except (ProtocolError, ValueError) as exc:
            raise InvalidAnswer(str(exc).splitlines()[0]) from None
    return value


def _validate(value: Any, schema: dict[str, Any], prefix: str) -> None:
    import jsonschema  # loaded with the first answer checked, not with the package

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = prefix + "".join(f"/{p}" for p in first.absolute_path) or "(the answer)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InvalidAnswer(f"at {where}: {first.message}{more}")
