"""What every backend does with a message payload or event data at its boundary.

Going in, a payload over ``MAX_MESSAGE_BYTES`` (event data over ``MAX_EVENT_BYTES``)
or nested deeper than ``MAX_JSON_DEPTH`` is refused before anything is written.
Coming out, a stored payload is decoded only *after* its delivery was counted, and
a payload that cannot be decoded (written by something that went around ``send``,
or by another version) is handed over with ``Delivery.problem`` saying why instead
of raising: the consumer logs it and lets it come back until it is dead-lettered,
like any message that keeps failing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenure.protocol.errors import ProtocolError
from tenure.protocol.limits import (
    MAX_EVENT_BYTES,
    MAX_MESSAGE_BYTES,
    decode_json,
    json_size,
    over,
)

Dumps = Callable[[Any], str]
STORED_BYTES = 6 * MAX_MESSAGE_BYTES
"""The most a stored payload can take: backends write JSON with ``\\uXXXX`` escapes, up
to six bytes for each byte a message may have. Longer is not read at all."""


def payload_text(payload: Any, dumps: Dumps) -> str:
    """``payload`` as the backend stores it (``dumps``), or ``ProtocolError``."""
    if not isinstance(payload, dict):
        raise ProtocolError("payload", f"a JSON object, got {type(payload).__name__}")
    return _bounded(payload, dumps, "payload", MAX_MESSAGE_BYTES)


def check_event_data(data: Any) -> None:
    """Event ``data`` a caller appends within its limits, or ``ProtocolError``."""
    if not isinstance(data, dict):
        raise ProtocolError("data", f"a JSON object, got {type(data).__name__}")
    try:
        size = json_size(data)
    except ProtocolError as exc:
        raise ProtocolError("data", exc.expected) from None
    if size > MAX_EVENT_BYTES:
        raise ProtocolError("data", f"{over(size, MAX_EVENT_BYTES)} (as compact JSON)")


def read_payload(text: str | bytes | None) -> tuple[dict[str, Any], str | None]:
    """A stored payload decoded, and ``None``; or ``{}`` and the one line saying why
    it cannot be. Never raises."""
    if text is None:
        return {}, "(message): a stored payload (none was found)"
    try:
        value = decode_json(text, limit=STORED_BYTES)
    except ProtocolError as exc:
        return {}, str(exc)
    if not isinstance(value, dict):
        return {}, f"(message): a JSON object, got {type(value).__name__}"
    return value, None


def read_event_data(text: str | bytes | None) -> dict[str, Any]:
    """Stored event data decoded; data that cannot be (written around the store) reads
    as ``{"problem": why}``, so reading the log never fails on one bad entry."""
    data, problem = read_payload(text)
    return data if problem is None else {"problem": problem}


def _bounded(value: dict[str, Any], dumps: Dumps, field: str, limit: int) -> str:
    """Measured as compact UTF-8 JSON (as the protocol counts), then stored."""
    try:
        size = json_size(value)
        text = dumps(value)
    except ProtocolError as exc:
        raise ProtocolError(field, exc.expected) from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProtocolError(field, f"a JSON object ({exc})") from None
    if size > limit:
        raise ProtocolError(field, f"{over(size, limit)} (as compact JSON)")
    return text
