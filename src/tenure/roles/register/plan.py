"""A plan in the register: the spec each task is registered with, and when a
register has nothing left that can move without a person.

Kept apart from the conductor because the queue mode and sub-leaders use
both without conducting anything.
"""

from __future__ import annotations

from typing import Any

from tenure.protocol import Plan, PlanTask, to_dict
from tenure.store import TaskRecord

__all__ = ["OPEN_STATES", "plan_settled", "plan_spec"]

OPEN_STATES = ("queued", "running", "review")


def plan_spec(plan: Plan, task: PlanTask) -> dict[str, Any]:
    spec = to_dict(task)
    spec["max_attempts"] = plan.attempts_for(task)
    if plan.budget is not None:  # the team's limits and planning spend travel with each task
        spec["team_budget"] = to_dict(plan.budget)
    if plan.planning_spend is not None:
        spec["planning_spend"] = to_dict(plan.planning_spend)
    if plan.policies:  # the team's tie-break policies, for the tasks that disagree
        spec["policies"] = plan.policies
    return spec


def plan_settled(tasks: list[TaskRecord]) -> bool:
    """True when each task is settled, or queued behind a dependency that is
    itself waiting for a person."""
    stuck = {t.task_id for t in tasks if t.state not in OPEN_STATES and t.state != "done"}
    grew = True
    while grew:
        grew = False
        for t in tasks:
            deps = t.spec.get("depends_on", [])
            if t.task_id not in stuck and t.state == "queued" and stuck.intersection(deps):
                stuck.add(t.task_id)
                grew = True
    return all(t.state not in OPEN_STATES or t.task_id in stuck for t in tasks)
