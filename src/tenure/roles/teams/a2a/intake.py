"""An A2A request made into a one-task plan of the served team, or refused.

The caller is as untrusted as a model: its message is data. A text part is the goal;
a data part may instead hold the task itself (``goal``, ``acceptance_criteria``,
``checks``, ``output_schema``, ``deadline_seconds``, ...) or a plan of one task
(``{"tasks": [...]}``). Either way the task is checked as a model's plan is
(``check_model_output``, nothing allowed): no command checks, executors, nested
teams, options or paths outside the working directory. The task's id comes from the
A2A task's, so a follow-up message finds it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tenure.executors.a2a_sdk import whole_numbers
from tenure.protocol import Plan, ProtocolError, parse_plan
from tenure.roles.planning import check_model_output

PREFIX = "a2a-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tenure_task_id(a2a_task_id: str) -> str:
    """The Tenure task id of an A2A task: ``a2a-<its id, safe characters only>``."""
    return PREFIX + _UNSAFE.sub("-", a2a_task_id)[:100]


def plan_for(
    team: str, task_id: str, text: str, data: list[Any], *, workdir: Path | None = None
) -> Plan:
    """The one-task plan a request asks for; ``ProtocolError`` or ``ValueError`` (a
    plan rule, ``NotAllowed``) saying why it is refused."""
    fields = _task_fields(text, data)
    fields["id"] = task_id
    plan = parse_plan(json.dumps({"team": team, "tasks": [fields]}), source="message")
    check_model_output(plan.tasks, workdir=workdir)
    return plan


def _task_fields(text: str, data: list[Any]) -> dict[str, Any]:
    found = [whole_numbers(each) for each in data if isinstance(each, dict)]
    if not found:
        if not text.strip():
            raise ProtocolError("message", "a text part (the goal) or a data part with a task")
        return {"goal": text.strip()}
    if len(found) > 1:
        raise ProtocolError("message", f"at most one data part with a task, got {len(found)}")
    fields = found[0]
    if "tasks" in fields:
        tasks = fields["tasks"]
        if set(fields) - {"tasks", "team"} or not isinstance(tasks, list) or len(tasks) != 1:
            raise ProtocolError("message.tasks", "a plan of exactly one task")
        if not isinstance(tasks[0], dict):
            raise ProtocolError("message.tasks[0]", "a task (an object with a goal)")
        fields = tasks[0]
    fields = {key: value for key, value in fields.items() if key != "id"}
    if "depends_on" in fields:
        raise ProtocolError("message.depends_on", "no dependencies: a request is one task")
    if not fields.get("goal") and text.strip():
        fields["goal"] = text.strip()
    return fields
