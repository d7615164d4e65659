"""Parsing and printing: the only door through which outside JSON becomes a message.

Every failure becomes one ``ProtocolError`` naming the field and what was
expected; nothing half-parsed escapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from tenure.protocol.envelope import TaskEnvelope, TaskResult
from tenure.protocol.errors import ProtocolError, UnreadableFile
from tenure.protocol.limits import (
    MAX_MESSAGE_BYTES,
    MAX_PLAN_BYTES,
    byte_size,
    check_depth,
    check_plan_shape,
    decode_json,
    over,
)
from tenure.protocol.messages import MESSAGE_CLASSES, Message
from tenure.protocol.plan import Plan
from tenure.protocol.yaml_guard import load_yaml

__all__ = [
    "MAX_MESSAGE_BYTES",
    "load_plan",
    "parse_envelope",
    "parse_message",
    "parse_plan",
    "parse_result",
    "to_dict",
    "to_json",
    "translate",
]

_M = TypeVar("_M", bound=BaseModel)
_UNION_TAGS = {"schema", "evidence", "command", "judge", "quorum", "source"}
_MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def parse_message(data: str | bytes | dict[str, Any], *, source: str | None = None) -> Message:
    """Validate one message (JSON text or a decoded object) or raise ``ProtocolError``."""
    obj = _decode(data, source)
    if not isinstance(obj, dict):
        raise ProtocolError("(message)", "a JSON object", source=source)
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in MESSAGE_CLASSES:
        raise ProtocolError(
            "type", f"one of {', '.join(MESSAGE_CLASSES)}; got {kind!r}", source=source
        )
    try:
        return _MESSAGE_ADAPTER.validate_python(obj)
    except ValidationError as exc:
        raise translate(exc, source=source, strip_tag=True) from None


def parse_envelope(data: dict[str, Any], *, source: str | None = None) -> TaskEnvelope:
    check_depth(data, "(envelope)", source=source)
    return _validate(TaskEnvelope, data, source)


def parse_result(data: dict[str, Any], *, source: str | None = None) -> TaskResult:
    check_depth(data, "(result)", source=source)
    return _validate(TaskResult, data, source)


def to_json(message: BaseModel) -> str:
    """Canonical JSON of any protocol model (aliases, e.g. ``from``, as on the wire)."""
    return message.model_dump_json(by_alias=True, exclude_none=False)


def to_dict(message: BaseModel) -> dict[str, Any]:
    return message.model_dump(mode="json", by_alias=True)


def load_plan(path: str | Path) -> Plan:
    """Read ``plan.yaml`` / ``plan.json``, or the first ```yaml block of ``plan.md``.
    A file over ``MAX_PLAN_BYTES`` is refused before it is read."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PLAN_BYTES + 1)
            if len(raw) > MAX_PLAN_BYTES:
                size = max(len(raw), path.stat().st_size)
                raise ProtocolError("(file)", over(size, MAX_PLAN_BYTES), source=str(path))
        text = raw.decode("utf-8")
    except OSError as exc:
        raise UnreadableFile(str(path), exc.strerror, what="plan file") from None
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            "(file)", f"UTF-8 text (byte {exc.start} is not)", source=str(path)
        ) from None
    return parse_plan(text, source=str(path), markdown=path.suffix.lower() == ".md")


def parse_plan(text: str, *, source: str = "plan", markdown: bool = False) -> Plan:
    """A plan from its text, checked against ``protocol.limits`` before and after
    parsing (size first; then nesting, aliases, values, string lengths, tasks)."""
    size = byte_size(text) if len(text) <= MAX_PLAN_BYTES else len(text)
    if size > MAX_PLAN_BYTES:
        raise ProtocolError("(plan)", over(size, MAX_PLAN_BYTES), source=source)
    offset = 0
    if markdown:
        text, offset = _yaml_block(text, source)
    obj = _json_plan(text)
    if obj is None:
        obj = load_yaml(text, source=source, offset=offset)
    if not isinstance(obj, dict):
        raise ProtocolError("(plan)", "a mapping with a 'tasks' list", source=source)
    check_plan_shape(obj, source=source)
    return _validate(Plan, obj, source)


def _json_plan(text: str) -> Any:
    """A plan written as JSON, read as JSON: PyYAML (YAML 1.1) reads ``1e3`` as a string
    and refuses some characters JSON allows. ``None`` if the text is not a JSON object."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None  # e.g. a YAML flow mapping; let the YAML reader judge it
    return obj if isinstance(obj, dict) else None


def _yaml_block(text: str, source: str) -> tuple[str, int]:
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.strip() in ("```yaml", "```yml"):
            for end in range(start + 1, len(lines)):
                if lines[end].strip() == "```":
                    return "\n".join(lines[start + 1 : end]), start + 1
            raise ProtocolError(f"line {start + 1}", "a closing ``` fence", source=source)
    raise ProtocolError("(markdown)", "a ```yaml block holding the plan", source=source)


def _decode(data: str | bytes | dict[str, Any], source: str | None) -> Any:
    if not isinstance(data, str | bytes | bytearray):
        check_depth(data, "(message)", source=source)
        return data  # already decoded; anything but a dict is refused by the caller
    return decode_json(data, source=source)


def _validate(model: type[_M], data: Any, source: str | None) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise translate(exc, source=source) from None


def translate(
    exc: ValidationError, *, source: str | None = None, strip_tag: bool = False
) -> ProtocolError:
    """The first pydantic error as one readable ``ProtocolError``."""
    first = exc.errors(include_url=False)[0]
    loc = list(first["loc"])
    if strip_tag and loc:
        loc = loc[1:]
    field = _path(loc)
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, ProtocolError):
        field = _join(field, cause.field)
        expected = cause.expected
    else:
        expected = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] not in ("missing", "extra_forbidden") and "input" in first and not cause:
        shown = repr(first["input"])
        expected += f"; got {shown[:60]}{'...' if len(shown) > 60 else ''}"
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        field = _join(field, str(first.get("ctx", {}).get("discriminator", "kind")).strip("'"))
    field = field or "(message)"
    if first["type"] == "extra_forbidden":
        expected = "no such field (unknown fields are refused)"
    more = len(exc.errors()) - 1
    if more:
        expected += f" (and {more} more error{'s' if more > 1 else ''})"
    return ProtocolError(field, expected, source=source)


def _join(path: str, field: str) -> str:
    """``field`` (named by a validator) inside ``path`` (where pydantic ran that validator).

    A validator may name its field relative to itself (``k``), by its own name
    (``task_id`` at ``body.task_id``), by a longer path starting with its own name
    (``policies.price`` at ``policies``), or not at all (``(policies)``)."""
    if not path or not field:
        return path or field
    if field.startswith("("):
        return path
    for start in range(len(path)):
        if start and path[start - 1] != ".":
            continue
        tail = path[start:]
        if field == tail or field.startswith((f"{tail}.", f"{tail}[")):
            return path[:start] + field
    return f"{path}.{field}"


def _path(loc: list[int | str]) -> str:
    out = ""
    previous: int | str | None = None
    for part in loc:
        tag = isinstance(previous, int) and part in _UNION_TAGS
        previous = part
        if isinstance(part, int):
            out += f"[{part}]"
        elif tag:
            continue  # the discriminator value pydantic inserts after a list index
        else:
            out += f".{part}" if out else str(part)
    return out
