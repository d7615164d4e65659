"""The rules a plan must keep before anything is dispatched, and the reading of answers.

1. it is a plan (Tenure's plan format, every field checked) and a DAG;
2. tasks that may run at the same time write disjoint scopes;
3. every task is grounded in a listed artifact or a dependency.

Each broken rule raises :class:`PlanRejected`, whose message is what the planner is
told, so the messages say what to change.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from tenure.executors.llm_materials import in_scope
from tenure.models import Completion
from tenure.protocol import Plan, PlanTask, ProtocolError
from tenure.protocol.codec import translate
from tenure.protocol.limits import check_plan_shape
from tenure.protocol.plan import check_plan_graph
from tenure.roles.planning.artifacts import Artifact

_FILE_NAME = re.compile(r"^[\w.-]+\.[A-Za-z0-9]{1,8}$")
NOT_REFERENCES = ("output_file",)  # outputs are new files; the scope governs them


class PlanRejected(ValueError):
    """The plan breaks a rule; the message is what the planner is told."""


def looks_like_reference(value: str) -> bool:
    """A string that names a file, a directory or a URL (not free text)."""
    value = value.strip()
    if not value or " " in value or "\n" in value or len(value) > 500:
        return False
    return bool(re.match(r"^https?://", value)) or "/" in value or bool(_FILE_NAME.match(value))


def references(task: PlanTask) -> list[str]:
    """Every file/URL-like string in the task's input (outputs excepted)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if looks_like_reference(value):
                found.append(value.strip())
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk({k: v for k, v in task.input.items() if k not in NOT_REFERENCES})
    return found


def check_grounding(tasks: list[PlanTask], artifacts: list[Artifact]) -> None:
    for task in tasks:
        refs = references(task)
        unknown = [r for r in refs if not any(a.covers(r) for a in artifacts)]
        if unknown:
            raise PlanRejected(
                f"task {task.id!r} names {unknown[0]!r}, which is not in the artifact list; "
                "use only the listed artifacts, by their exact names"
            )
        named = {str(v).strip() for v in _values(task.input)}
        inputs = any(a.kind == "input" and a.name in named for a in artifacts)
        if not refs and not inputs and not task.depends_on:
            raise PlanRejected(
                f"task {task.id!r} is grounded in no listed artifact: name at least one in its "
                "input, or make it depend on a task that is"
            )


def _values(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for item in value.values() for v in _values(item)]
    if isinstance(value, list):
        return [v for item in value for v in _values(item)]
    return [value]


def check_scopes(tasks: list[PlanTask], *, within: list[str] | None = None) -> None:
    """Writers that may run at once have disjoint scopes (and stay ``within`` if given)."""
    ancestors = _ancestors(tasks)
    for task in tasks:
        if within is not None:
            outside = [s for s in task.scope if not in_scope(s, within)]
            if outside:
                raise PlanRejected(
                    f"task {task.id!r} writes {outside[0]!r}, outside the scope it was split "
                    f"from ({', '.join(within) or 'nothing'})"
                )
    for i, first in enumerate(tasks):
        for second in tasks[i + 1 :]:
            if first.id in ancestors[second.id] or second.id in ancestors[first.id]:
                continue  # ordered by dependency: never at the same time
            for path in first.scope:
                for other in second.scope:
                    if in_scope(path, [other]) or in_scope(other, [path]):
                        raise PlanRejected(
                            f"tasks {first.id!r} and {second.id!r} both write {path!r} and "
                            "neither depends on the other: give them disjoint scopes or order "
                            "them with depends_on"
                        )


def _ancestors(tasks: list[PlanTask]) -> dict[str, set[str]]:
    deps = {t.id: set(t.depends_on) for t in tasks}
    out: dict[str, set[str]] = {}

    def visit(task_id: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if task_id in out:
            return out[task_id]
        found: set[str] = set()
        for dep in deps.get(task_id, ()):
            if dep in seen:
                continue
            found |= {dep, *visit(dep, seen | {task_id})}
        out[task_id] = found
        return found

    for task_id in deps:
        visit(task_id)
    return out


def check_plan(plan: Plan, artifacts: list[Artifact]) -> None:
    """All three rules; PlanRejected with the first broken one."""
    check_scopes(plan.tasks)
    check_grounding(plan.tasks, artifacts)


# --- reading answers ------------------------------------------------------------------------


def tasks_of(completion: Completion) -> list[dict[str, Any]]:
    """The task objects of a plan answer (``{"tasks": [...]}`` or a bare list)."""
    try:
        value = completion.json()
    except ValueError as exc:
        raise PlanRejected(f"the answer is not JSON ({exc})") from None
    if isinstance(value, dict) and isinstance(value.get("tasks"), list):
        tasks = value["tasks"]
    elif isinstance(value, list):
        tasks = value
    else:
        raise PlanRejected('the answer must be a JSON object {"tasks": [...]}')
    if not tasks:
        raise PlanRejected("the plan has no tasks")
    if not all(isinstance(t, dict) for t in tasks):
        raise PlanRejected("every task must be a JSON object")
    return list(tasks)


def validate_plan(data: dict[str, Any]) -> Plan:
    """``data`` as a Plan; its protocol error becomes the reason the planner is told."""
    try:
        check_plan_shape(data, source="plan")
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanRejected(str(translate(exc, source="plan"))) from None
    except ProtocolError as exc:
        raise PlanRejected(str(exc)) from None


def prefixed_parts(parent: PlanTask, raw: list[dict[str, Any]], taken: set[str]) -> list[PlanTask]:
    """Children of ``parent`` with ids ``<parent>.<id>``, depending on each other and on
    the parent's own dependencies; scope defaults to none, deadline to the parent's."""
    mapping: dict[str, str] = {}
    for item in raw:
        short = str(item.get("id", "")).strip()
        new = f"{parent.id}.{short}"
        if new in taken or new in mapping.values():
            raise PlanRejected(f"task id {short!r} is not unique")
        mapping[short] = new
    parts = []
    for index, item in enumerate(raw):
        deps = [str(d) for d in item.get("depends_on", []) or []]
        unknown = [d for d in deps if d not in mapping]
        if unknown:
            raise PlanRejected(
                f"tasks[{index}].depends_on names {unknown[0]!r}, which is none of the split tasks"
            )
        data = {
            "deadline_seconds": parent.deadline_seconds,
            "capability": parent.capability,
            "max_attempts": parent.max_attempts,
            **item,
            "id": mapping[str(item.get("id", "")).strip()],
            "depends_on": [*parent.depends_on, *(mapping[d] for d in deps)],
        }
        if parent.executor and "executor" not in item:
            data["executor"] = parent.executor
        try:
            parts.append(PlanTask.model_validate(data))
        except ValidationError as exc:
            raise PlanRejected(str(translate(exc, source=f"tasks[{index}]"))) from None
        except ProtocolError as exc:
            raise PlanRejected(str(exc)) from None
    try:
        check_plan_graph(parts + [PlanTask(id=d, goal="done") for d in parent.depends_on])
    except ProtocolError as exc:
        raise PlanRejected(str(exc)) from None
    return parts
