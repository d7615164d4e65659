"""``tenure schema`` and ``tenure validate``: the protocol, from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tenure.console.app import app, fail, out
from tenure.console.safe import safe_text
from tenure.protocol import ProtocolError, json_schema, parse_message
from tenure.protocol.schema import schema_names


@app.command()
def schema(
    type_name: Annotated[
        str | None,
        typer.Argument(
            metavar="[TYPE]", help="A message type (task.assign), envelope, result or plan."
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of one message type, or of all of them.

    Example: `tenure schema task.assign`
    """
    if type_name is not None and type_name not in schema_names():
        raise fail(f"unknown type {type_name!r}; choose one of: {', '.join(schema_names())}", 2)
    out.print_json(json.dumps(json_schema(type_name)))


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="A JSON file holding one message.")],
) -> None:
    """Validate a message file; exit 0 if valid, else 1 naming the offending field.

    Example: `tenure validate examples/messages/assign.json`
    """
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise fail(f"{file}: cannot read ({exc.strerror})", 2) from None
    try:
        message = parse_message(data, source=str(file))
    except ProtocolError as exc:
        raise fail(str(exc)) from None
    shown = f"{message.type} message {message.id} for team {message.team!r}"
    out.print(f"[green]valid[/] {safe_text(shown)}")
