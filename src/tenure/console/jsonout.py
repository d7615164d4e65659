"""``--json``: what a command reports, as one JSON document on stdout for scripts.

Every command that reports something takes ``--json`` and then prints exactly one
JSON object on stdout, on one line::

    {"version": 1, "command": "status", ...}

``version`` is the shape's version: a key is added within a version, never renamed
or removed (that would be version 2). ``command`` names the command that printed it.
What else each command prints is listed in docs/operations.md (JSON output). An
error is still one line on stderr with the same exit status, and nothing on stdout;
a warning goes to stderr too. ``tenure log --follow --json`` is the one stream: one
event object per line, as they arrive.

Strings a member wrote are redacted here (known secrets) before encoding; control
characters come out as JSON escapes, so what reaches the terminal is inert.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from typing import IO, Annotated, Any, cast

import typer

from tenure.console.app import out
from tenure.protocol.secrets import redact_value

VERSION = 1
"""The version of every command's JSON shape."""

JsonOption = Annotated[
    bool,
    typer.Option(
        "--json", help="Print one JSON object for scripts (docs/operations.md, JSON output)."
    ),
]


def encoded(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as dicts, secrets redacted."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    return redact_value(json.loads(json.dumps(value, default=_fallback)))


def emit(command: str, **fields: Any) -> None:
    """Print ``{"version": 1, "command": COMMAND, **fields}`` as one line on stdout."""
    line({"version": VERSION, "command": command, **fields})


def line(value: Any) -> None:
    """One JSON value on a line of its own, flushed (a follower may be reading)."""
    sys.stdout.write(json.dumps(encoded(value), ensure_ascii=True) + "\n")
    sys.stdout.flush()


@contextmanager
def people_on_stderr(as_json: bool) -> Iterator[None]:
    """While a ``--json`` command runs, what it prints for people (progress, notes)
    goes to stderr, so stdout holds the JSON document alone."""
    if not as_json:
        yield
        return
    out.file = sys.stderr
    try:
        yield
    finally:
        out.file = cast(IO[str], None)  # back to following sys.stdout, whatever it is


def _fallback(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)
