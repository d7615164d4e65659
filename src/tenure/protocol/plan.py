"""Plans: the tasks a leader dispatches, checked as a DAG before anything runs."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import Any

from pydantic import Field, field_validator, model_validator

from tenure.protocol.envelope import Budget, Check, JsonObject, Spend, Strict, check_json_schema
from tenure.protocol.errors import ProtocolError
from tenure.protocol.ids import check_task_id, check_team
from tenure.protocol.limits import check_text
from tenure.protocol.policy import check_policies

DEFAULT_MAX_ATTEMPTS = 3
MAX_DEADLINE_SECONDS = 86_400.0
"""A task's longest deadline, a day: supervision and a queue claim's invisibility are
measured in it, and past a day a silent worker is not worth waiting for."""
SUBTEAM_CAPABILITY = "subteam"  # what a member must offer to lead a nested team


class PlanTask(Strict):
    """One task of a plan, as an operator or a planner writes it."""

    id: str
    goal: str = Field(min_length=1)
    acceptance_criteria: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    depends_on: list[str] = Field(default_factory=list)
    scope: list[str] = Field(default_factory=list)
    capability: str | None = None
    deadline_seconds: float = Field(default=300.0, gt=0, le=MAX_DEADLINE_SECONDS)
    input: JsonObject = Field(default_factory=dict)
    output_schema: JsonObject | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=20)
    executor: str | None = None
    budget: Budget | None = None
    team: SubTeam | None = None  # a composite task: a nested team runs it
    options: JsonObject = Field(default_factory=dict)  # read by leader hooks that declare them

    @model_validator(mode="before")
    @classmethod
    def _composite_capability(cls, data: Any) -> Any:
        """A composite task goes to a member that can lead its nested team."""
        if isinstance(data, dict) and data.get("team") is not None and not data.get("capability"):
            return {**data, "capability": SUBTEAM_CAPABILITY}
        return data

    @field_validator("output_schema")
    @classmethod
    def _valid_output_schema(cls, value: JsonObject | None) -> JsonObject | None:
        return None if value is None else check_json_schema(value)

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return check_task_id(value, "id")

    @field_validator("goal")
    @classmethod
    def _goal_size(cls, value: str) -> str:
        return check_text(value, "goal")


class SubTeam(Strict):
    """The plan section of a composite task: the nested team's own tasks and policies.

    The nested team's path is ``<parent team>/<task id>`` unless ``name`` says otherwise.
    A section with a ``goal``, ``artifacts`` and no ``tasks`` is planned by the
    sub-leader's model when the nested team first runs (``planned_by_sub_leader``).
    """

    name: str | None = None
    goal: str = ""
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=20)
    tasks: list[PlanTask] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    policies: dict[str, Any] = Field(default_factory=dict)
    budget: Budget | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else check_team(value, "name")

    @field_validator("goal")
    @classmethod
    def _goal_size(cls, value: str) -> str:
        return check_text(value, "goal")

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_policies(value)

    @model_validator(mode="after")
    def _well_formed(self) -> SubTeam:
        if self.tasks:
            if self.artifacts:
                raise ProtocolError(
                    "artifacts", "only in a section with a goal and no tasks (for its planner)"
                )
            check_plan_graph(self.tasks)
        elif not self.goal.strip():
            raise ProtocolError(
                "tasks", "the nested team's tasks, or a goal (and artifacts) for its planner"
            )
        elif not self.artifacts:
            raise ProtocolError(
                "artifacts",
                "at least one path or URL the nested team can reach: its planner uses only these",
            )
        return self

    @property
    def planned_by_sub_leader(self) -> bool:
        return not self.tasks

    def plan_for(self, team: str, goal: str) -> Plan:
        """The nested team's plan; a goal-only section's has no tasks until it is planned
        (built unchecked: the section was checked, and a Plan needs tasks)."""
        fields: dict[str, Any] = {
            "team": team,
            "goal": self.goal or goal,
            "max_attempts": self.max_attempts,
            "tasks": self.tasks,
            "policies": self.policies,
            "budget": self.budget,
        }
        return Plan(**fields) if self.tasks else Plan.model_construct(**fields)


PlanTask.model_rebuild()  # a task may hold a team whose tasks are PlanTasks


class Plan(Strict):
    """A team's whole plan: ids unique, dependencies present, no cycle."""

    team: str = "default"
    goal: str = ""
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=20)
    tasks: list[PlanTask] = Field(min_length=1)
    policies: dict[str, Any] = Field(default_factory=dict)
    budget: Budget | None = None
    planning_spend: Spend | None = None

    @field_validator("team")
    @classmethod
    def _team(cls, value: str) -> str:
        return check_team(value)

    @field_validator("goal")
    @classmethod
    def _goal_size(cls, value: str) -> str:
        return check_text(value, "goal")

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_policies(value)

    @model_validator(mode="after")
    def _well_formed(self) -> Plan:
        check_plan_graph(self.tasks)
        _check_nested_paths(self.team, self.tasks, "tasks", {self.team: "team"})
        return self

    def task(self, task_id: str) -> PlanTask:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def attempts_for(self, task: PlanTask) -> int:
        return task.max_attempts or self.max_attempts


def check_plan_graph(tasks: list[PlanTask]) -> list[str]:
    """Refuse duplicate ids, missing dependencies and cycles; return a dispatch order."""
    seen: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task.id in seen:
            raise ProtocolError(
                f"tasks[{index}].id", f"a unique id; {task.id!r} is also tasks[{seen[task.id]}]"
            )
        seen[task.id] = index
    graph: dict[str, list[str]] = {}
    for index, task in enumerate(tasks):
        for dep in task.depends_on:
            if dep not in seen:
                raise ProtocolError(
                    f"tasks[{index}].depends_on", f"ids of tasks in this plan; {dep!r} is not one"
                )
            if dep == task.id:
                raise ProtocolError(f"tasks[{index}].depends_on", f"{task.id!r} depends on itself")
        graph[task.id] = list(task.depends_on)
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        # graphlib lists each node before the ones that depend on it; show "depends on" order
        nodes = [str(node) for node in reversed(exc.args[1])]
        raise ProtocolError(
            f"tasks[{seen[nodes[0]]}].depends_on",
            f"no dependency cycle; found {' -> '.join(nodes)} (each depends on the next)",
        ) from None


def subteam_path(parent: str, task: PlanTask) -> str:
    """The path of the team that runs a composite task."""
    assert task.team is not None
    return task.team.name or f"{parent}/{task.id}"


def subteam_plan(parent: str, task: PlanTask) -> Plan:
    """The nested team's own plan, as its sub-leader loads it."""
    assert task.team is not None
    return task.team.plan_for(subteam_path(parent, task), task.goal)


def plan_executors(plan: Plan) -> tuple[str, ...]:
    """Every executor a plan's tasks name (nested teams' included): what an operator's
    plan lets its workers run besides their own (``--allow-exec``)."""
    found: dict[str, None] = {}

    def walk(tasks: list[PlanTask]) -> None:
        for task in tasks:
            if task.executor:
                found[task.executor] = None
            if task.team is not None:
                walk(task.team.tasks)

    walk(plan.tasks)
    return tuple(found)


def team_tree(plan: Plan) -> list[Plan]:
    """The plan and every nested team's plan, parents first (a goal-only team's with
    no tasks: its sub-leader plans them)."""
    found = [plan]
    for task in plan.tasks:
        if task.team is not None:
            found.extend(team_tree(subteam_plan(plan.team, task)))
    return found


def _check_nested_paths(
    parent: str, tasks: list[PlanTask], where: str, seen: dict[str, str]
) -> None:
    """Each nested team's path is a valid, unique team path (depth included)."""
    for index, task in enumerate(tasks):
        if task.team is None:
            continue
        here = f"{where}[{index}].team"
        path = subteam_path(parent, task)
        check_team(path, f"{here}.name")
        if path in seen:
            raise ProtocolError(f"{here}.name", f"a team path of its own; {path!r} is {seen[path]}")
        seen[path] = here
        _check_nested_paths(path, task.team.tasks, f"{here}.tasks", seen)
