"""``tenure schema`` and ``tenure validate``: the protocol, from the command line.

``validate`` takes a message or a plan, told apart by the file's name (``.yaml``,
``.yml``, ``.md``: a plan) or its content (JSON with ``tasks`` or a ``goal`` and no
``type``, or YAML with a top-level ``tasks:``, ``team:`` or ``goal:``: a plan). A plan
is checked as a run loads it, so what ``validate`` passes, ``tenure run`` does not
refuse for its text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from tenure.console import jsonout
from tenure.console.app import app, fail, out
from tenure.console.exits import Exit
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.executors.paths import check_task_paths
from tenure.protocol import Plan, ProtocolError, TenureError, json_schema, load_plan, parse_message
from tenure.protocol.limits import MAX_MESSAGE_BYTES, over
from tenure.protocol.schema import schema_names
from tenure.roles.teams.leader import check_leader_plan

PLAN_SUFFIXES = (".yaml", ".yml", ".md")
_YAML_PLAN = re.compile(rb"^(tasks|team|goal)\s*:", re.MULTILINE)


@app.command()
def schema(
    type_name: Annotated[
        str | None,
        typer.Argument(
            metavar="TYPE", help="A message type (task.assign), envelope, result or plan."
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of one message type, or of all of them.

    Example: `tenure schema task.assign`
    """
    if type_name is not None and type_name not in schema_names():
        names = ", ".join(schema_names())
        raise fail(f"unknown type {type_name!r}; choose one of: {names}", Exit.USAGE)
    out.print_json(json.dumps(json_schema(type_name)))


@app.command()
def validate(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="A message (JSON) or a plan (plan.yaml, plan.json, plan.md)."),
    ],
    workdir: Annotated[
        Path | None,
        typer.Option(help="A plan's working directory: its scopes stay inside (default: here)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Validate a message or a plan file; exit 0 if valid, else 1 with one line naming
    the field.

    A plan is checked as `tenure run` loads it: its keys, its limits, its dependencies,
    options no leader feature reads, scopes inside the working directory.

    Example: `tenure validate examples/messages/task-assign.json`

    Example: `tenure validate examples/vendor-pricing/plan.yaml`
    """
    try:
        with file.open("rb") as handle:  # no more than one byte over the limit is read
            data = handle.read(MAX_MESSAGE_BYTES + 1)
    except OSError as exc:
        raise fail(f"{file}: cannot read ({exc.strerror})", Exit.USAGE) from None
    if _is_plan(file, data):
        _validate_plan(file, workdir, as_json=as_json)
        return
    if len(data) > MAX_MESSAGE_BYTES:
        size = max(len(data), file.stat().st_size)
        raise fail(f"{file}: (message): {over(size, MAX_MESSAGE_BYTES)}")
    try:
        message = parse_message(data, source=str(file))
    except ProtocolError as exc:
        raise fail(str(exc)) from None
    if as_json:
        jsonout.emit(
            "validate",
            file=str(file),
            valid=True,
            type=message.type,
            id=message.id,
            team=message.team,
        )
        return
    shown = f"{message.type} message {message.id} for team {message.team!r}"
    out.print(f"[green]valid[/] {safe_text(shown)}")


def _is_plan(file: Path, data: bytes) -> bool:
    """A plan by its name, else by its content (what is left is read as a message)."""
    if file.suffix.lower() in PLAN_SUFFIXES:
        return True
    try:
        value = json.loads(data)
    except ValueError:  # not JSON: a YAML plan, or a broken message (said as such)
        return _YAML_PLAN.search(data) is not None
    return isinstance(value, dict) and "type" not in value and ("tasks" in value or "goal" in value)


def _validate_plan(file: Path, workdir: Path | None, *, as_json: bool) -> None:
    """Every refusal a run makes of a plan's text, as one line (exit 1)."""
    try:
        plan = load_plan(file)
        check_leader_plan(plan)  # options no feature reads, nested teams' too
        check_task_paths(plan.tasks, workdir)
    except TenureError as exc:
        raise fail(_sourced(str(exc), file)) from None
    if as_json:
        jsonout.emit("validate", file=str(file), valid=True, type="plan", id=None, team=plan.team)
        return
    out.print(f"[green]valid[/] plan for team {safe_text(repr(plan.team))}: {_size(plan)}")


def _sourced(line: str, file: Path) -> str:
    """``line`` said of ``file`` (the loader names it; the later checks do not)."""
    return line if line.startswith(str(file)) else f"{file}: {line}"


def _size(plan: Plan) -> str:
    count = len(plan.tasks)
    nested = sum(task.team is not None for task in plan.tasks)
    tasks = "1 task" if count == 1 else f"{count} tasks"
    return tasks + (f" ({nested} with a nested team)" if nested else "")
