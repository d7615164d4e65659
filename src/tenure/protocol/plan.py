"""Plans: the tasks a leader dispatches, checked as a DAG before anything runs."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import Any

from pydantic import Field, field_validator, model_validator

from tenure.protocol.envelope import Budget, Check, JsonObject, Spend, Strict, check_json_schema
from tenure.protocol.errors import ProtocolError
from tenure.protocol.ids import check_task_id, check_team
from tenure.protocol.policy import check_policies

DEFAULT_MAX_ATTEMPTS = 3


class PlanTask(Strict):
    """One task of a plan, as an operator or a planner writes it."""

    id: str
    goal: str = Field(min_length=1)
    acceptance_criteria: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    depends_on: list[str] = Field(default_factory=list)
    scope: list[str] = Field(default_factory=list)
    capability: str | None = None
    deadline_seconds: float = Field(default=300.0, gt=0)
    input: JsonObject = Field(default_factory=dict)
    output_schema: JsonObject | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=20)
    executor: str | None = None
    budget: Budget | None = None

    @field_validator("output_schema")
    @classmethod
    def _valid_output_schema(cls, value: JsonObject | None) -> JsonObject | None:
        return None if value is None else check_json_schema(value)

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return check_task_id(value, "id")


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

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_policies(value)

    @model_validator(mode="after")
    def _well_formed(self) -> Plan:
        check_plan_graph(self.tasks)
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
