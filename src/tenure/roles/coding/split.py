"""Split once before the inbox: a coding task that failed every attempt becomes parts.

``CodingConfig.splitter`` is any ``split(task, failures) -> parts``;
:class:`PlannerSplit` asks the LLM planner (``tenure code --split-with MODEL``).
The parts replace the task in the plan, in its place: every part keeps within the
task's scope and has a command check of its own; the last part in merge order
depends on all the others and also carries the task's own checks, so the task's
acceptance is still run — on the parts' work together. Tasks that depended on the
task depend on that last part. A part is never split again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tenure.protocol import CommandCheck, Plan, PlanTask
from tenure.protocol.errors import ProtocolError
from tenure.roles.coding.scope import in_scope, merge_order
from tenure.roles.planning.planner import Artifact, Planner

Split = Callable[[PlanTask, list[str]], list[PlanTask]]


@dataclass
class PlannerSplit:
    """The LLM planner as a splitter; the task's scope entries are its artifacts."""

    planner: Planner
    root: Path
    max_parts: int = 5

    def __call__(self, task: PlanTask, failures: list[str]) -> list[PlanTask]:
        artifacts = [Artifact(s, "dir" if (self.root / s).is_dir() else "file") for s in task.scope]
        parts, _ = self.planner.split(
            task, failures, artifacts, taken=set(), max_parts=self.max_parts
        )
        return parts


def split_plan(plan: Plan, parent_id: str, parts: list[PlanTask]) -> tuple[Plan, str]:
    """The plan with ``parent_id`` replaced by ``parts``, and the id of the last part.
    ProtocolError (naming what is wrong) when the parts cannot stand in for it."""
    parent = plan.task(parent_id)
    if len(parts) < 2:
        raise ProtocolError("split", f"at least 2 parts for {parent_id!r}, got {len(parts)}")
    others = {t.id for t in plan.tasks if t.id != parent_id}
    for part in parts:
        if part.id in others:
            raise ProtocolError("split", f"part id {part.id!r} is already a task of the plan")
        outside = [s for s in part.scope if parent.scope and not in_scope(s, parent.scope)]
        if outside:
            raise ProtocolError(
                "split", f"part {part.id!r} writes {outside[0]!r}, outside {parent_id}'s scope"
            )
        if not any(isinstance(c, CommandCheck) for c in part.checks):
            raise ProtocolError("split", f"part {part.id!r} has no command check of its own")
    order = merge_order(Plan(team=plan.team, tasks=parts))
    last = order[-1]
    own = [c for c in parent.checks if isinstance(c, CommandCheck)]
    fixed: list[PlanTask] = []
    for part in parts:
        update: dict[str, object] = {}
        if not part.scope:
            update["scope"] = list(parent.scope)
        if part.id == last:
            update["depends_on"] = list(dict.fromkeys([*part.depends_on, *order[:-1]]))
            update["checks"] = [*part.checks, *own]
        fixed.append(part.model_copy(update=update))
    tasks: list[PlanTask] = []
    for task in plan.tasks:
        if task.id == parent_id:
            tasks.extend(fixed)
        elif parent_id in task.depends_on:
            deps = [last if d == parent_id else d for d in task.depends_on]
            tasks.append(task.model_copy(update={"depends_on": deps}))
        else:
            tasks.append(task)
    data = plan.model_dump(exclude={"tasks"})
    new = Plan.model_validate({**data, "tasks": [t.model_dump() for t in tasks]})
    return new, last
