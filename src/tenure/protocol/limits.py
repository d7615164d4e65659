"""Every size, depth and count limit a team enforces, written once.

A limit is checked where outside data comes in — a plan file, a model's plan, a
message sent or received, an executor's output, an event — and a breach is one
``ProtocolError`` naming the field and the limit, never a crash deeper down.
``docs/protocol.md`` lists them (a test keeps the table and these values equal).
"""

from __future__ import annotations

import json
from typing import Any

from tenure.protocol.errors import ProtocolError

MAX_BODY_BYTES = 256 * 1024
"""Largest message body, as compact UTF-8 JSON: bigger artifacts travel by reference."""
MAX_MESSAGE_BYTES = MAX_BODY_BYTES + 16 * 1024
"""Largest whole message as stored or received: the body plus room for the header."""
MAX_RESULT_BYTES = MAX_BODY_BYTES - 4 * 1024
"""Largest result a worker builds from its executor's output: room left for its signature."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of objects and lists in any message, result, plan or event."""
MAX_PLAN_BYTES = 2 * 1024 * 1024
"""Largest plan file or plan text, checked before it is parsed."""
MAX_PLAN_NODES = 200_000
"""Most values (scalars, lists, objects) a plan may hold once YAML aliases are expanded."""
MAX_YAML_ALIASES = 1_000
"""Most alias uses (``*name``) in a YAML plan."""
MAX_TASKS = 5_000
"""Most tasks in a plan, nested teams' tasks included: a plan registers in one step."""
MAX_FIELD_BYTES = 64 * 1024
"""Longest single string in a plan (a goal, a criterion, a command) or a ``--goal``."""
MAX_TASK_BYTES = 128 * 1024
"""Largest plan task as compact JSON (a nested team's section aside): its envelope must
still fit in one message once its history and its dependencies' results are added."""
MAX_EVENT_BYTES = 64 * 1024
"""Largest event data, as compact UTF-8 JSON."""
MAX_SLOTS = 256
"""Most attempts one member runs at once (``--concurrency``), as it joins its team."""
MIN_PRIORITY, MAX_PRIORITY = -1_000_000, 1_000_000
"""A member's priority (``--priority``): a preference, highest first; a million steps
either way is plenty and every backend keeps it exactly."""

LIMITS: dict[str, int] = {
    "MAX_BODY_BYTES": MAX_BODY_BYTES,
    "MAX_MESSAGE_BYTES": MAX_MESSAGE_BYTES,
    "MAX_RESULT_BYTES": MAX_RESULT_BYTES,
    "MAX_JSON_DEPTH": MAX_JSON_DEPTH,
    "MAX_PLAN_BYTES": MAX_PLAN_BYTES,
    "MAX_PLAN_NODES": MAX_PLAN_NODES,
    "MAX_YAML_ALIASES": MAX_YAML_ALIASES,
    "MAX_TASKS": MAX_TASKS,
    "MAX_FIELD_BYTES": MAX_FIELD_BYTES,
    "MAX_TASK_BYTES": MAX_TASK_BYTES,
    "MAX_EVENT_BYTES": MAX_EVENT_BYTES,
    "MAX_SLOTS": MAX_SLOTS,
    "MAX_PRIORITY": MAX_PRIORITY,
}


def over(size: int, limit: int, unit: str = "bytes") -> str:
    """The words of every size refusal: ``1,048,576 bytes; the limit is 65,536``."""
    return f"{size:,} {unit}; the limit is {limit:,}"


def human(size: int) -> str:
    """A byte count for people: ``20.0 MiB``, ``256 KiB``, ``812 bytes``."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    if size >= 1024:
        return f"{size / 1024:.0f} KiB"
    return f"{size} bytes"


def byte_size(text: str | bytes | bytearray) -> int:
    """UTF-8 bytes of ``text`` (a lone surrogate counts as the 3 bytes it would take)."""
    if isinstance(text, bytes | bytearray):
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON; ``ProtocolError`` if it is not JSON or
    nests deeper than ``MAX_JSON_DEPTH``."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise ProtocolError("(value)", _too_deep()) from None
    except (ValueError, TypeError) as exc:
        raise ProtocolError("(value)", f"a JSON value ({exc})") from None
    if not shallow(text):
        check_depth(value, "(value)")
    return byte_size(text)


def shallow(text: str | bytes | bytearray, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when JSON ``text`` surely nests no deeper than ``limit``: it opens no more
    objects and lists than that in all (a bracket inside a string counts too, which
    only makes the answer more careful). Most messages are judged by this count alone,
    without walking the decoded value."""
    if isinstance(text, str):
        return text.count("{") + text.count("[") <= limit
    return text.count(b"{") + text.count(b"[") <= limit


def decode_json(
    data: str | bytes | bytearray,
    *,
    field: str = "(message)",
    limit: int = MAX_MESSAGE_BYTES,
    source: str | None = None,
) -> Any:
    """JSON text decoded, or one ``ProtocolError``: too large (checked before decoding),
    not UTF-8, not JSON, or nested deeper than ``MAX_JSON_DEPTH``. Never another error."""
    size = len(data)
    if isinstance(data, str) and size <= limit:
        size = byte_size(data)
    if size > limit:
        raise ProtocolError(field, over(size, limit), source=source)
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "(bytes)"
        if field != "(message)":
            where = field
        raise ProtocolError(where, f"valid JSON ({exc})", source=source) from None
    except RecursionError:
        raise ProtocolError(field, _too_deep(), source=source) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ProtocolError(field, f"valid JSON ({exc})", source=source) from None
    if not shallow(data):
        check_depth(value, field, source=source)
    return value


def check_depth(
    value: Any, field: str, *, limit: int = MAX_JSON_DEPTH, source: str | None = None
) -> None:
    """Refuse objects and lists nested more than ``limit`` deep (an object holding a
    scalar is 1 deep), without recursing: a deep value must not exhaust the stack here
    or anywhere after."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            raise ProtocolError(field, _too_deep(limit), source=source)
        stack.extend((child, depth + 1) for child in children)


def check_plan_shape(value: Any, *, source: str | None = None) -> None:
    """A decoded plan within its limits, the first breach named by its path: nesting,
    values, the length of each string, the number of tasks (nested teams' too) and the
    size of each task."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    nodes = tasks = 0
    task_lists: list[tuple[str, list[Any]]] = []
    while stack:
        node, depth, path = stack.pop()
        nodes += 1
        if nodes > MAX_PLAN_NODES:
            raise ProtocolError(
                "(plan)", over(nodes, MAX_PLAN_NODES, "values or more"), source=source
            )
        if isinstance(node, str):
            size = byte_size(node)
            if size > MAX_FIELD_BYTES:
                raise ProtocolError(path or "(plan)", over(size, MAX_FIELD_BYTES), source=source)
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise ProtocolError(path or "(plan)", _too_deep(), source=source)
        if isinstance(node, dict):
            items: list[tuple[str, Any]] = []
            for key, child in node.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and byte_size(key) > MAX_FIELD_BYTES:
                    raise ProtocolError(
                        f"{path or '(plan)'} (a key)",
                        over(byte_size(key), MAX_FIELD_BYTES),
                        source=source,
                    )
                items.append((where[:200], child))
            listed = node.get("tasks")
            if isinstance(listed, list) and (not path or path.endswith(".team")):
                tasks += len(listed)
                if tasks > MAX_TASKS:
                    raise ProtocolError("tasks", over(tasks, MAX_TASKS, "tasks"), source=source)
                task_lists.append((f"{path}.tasks" if path else "tasks", listed))
        else:
            items = [(f"{path}[{index}]", child) for index, child in enumerate(node)]
        stack.extend((child, depth + 1, where) for where, child in reversed(items))
    for where, listed in task_lists:
        _check_task_sizes(where, listed, source)


def _check_task_sizes(where: str, listed: list[Any], source: str | None) -> None:
    for index, task in enumerate(listed):
        if not isinstance(task, dict):
            continue  # the plan's model says what a task must be
        own = {key: value for key, value in task.items() if key != "team"}
        size = json_size(own)
        if size > MAX_TASK_BYTES:
            raise ProtocolError(
                f"{where}[{index}]", f"{over(size, MAX_TASK_BYTES)} (as compact JSON)", source=source
            )


def check_text(value: str, field: str, *, limit: int = MAX_FIELD_BYTES) -> str:
    """One string within ``limit`` bytes (a ``--goal``, a goal a model is given)."""
    size = byte_size(value)
    if size > limit:
        raise ProtocolError(field, over(size, limit))
    return value


def _too_deep(limit: int = MAX_JSON_DEPTH) -> str:
    return f"objects and lists nested at most {limit} deep"
