"""Goal-only nested teams: the sub-leader plans the child team once, with its model.

A composite task whose ``team:`` section gives a goal and artifacts but no tasks
is planned when its nested team first runs. The plan is written to the child
team's event log (``subteam.planned``) before its leader loads it, so whoever
leads the child team later (a second attempt, a stand-in, a sub-leader that
died half way through loading) adopts that plan and never asks the model again.

The planner's calls are logged there too (``planner.call``): that is how the
planning spend travels up in the roll-up's usage, once, with the calls of a
planning that failed included.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tenure.models.meter import Meter
from tenure.protocol import Plan, Spend, TenureError, to_dict
from tenure.protocol.errors import ConfigError
from tenure.protocol.plan import SubTeam
from tenure.protocol.taskspec import SpendEntry
from tenure.roles.features.nested.rollup import nested_spend
from tenure.roles.planning import Planner, artifacts_from
from tenure.roles.register import Task
from tenure.store import Store

PLANNED = "subteam.planned"
SPEND_KEYS = ("input_tokens", "output_tokens", "cost_usd", "calls")
PAGE = 1000


@dataclass
class ChildLog:
    """What the child team's event log says about its planning."""

    plan: Plan | None = None  # the first plan written for it
    spend: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SPEND_KEYS, 0.0))


def read_log(store: Store, team: str) -> ChildLog:
    found = ChildLog()
    after = 0
    while True:
        events = store.events(team, after=after, limit=PAGE)
        for event in events:
            if event.kind == PLANNED and found.plan is None:
                found.plan = Plan.model_validate(event.data["plan"])
            elif event.kind == "planner.call" and event.data.get("purpose") == "plan":
                for key in SPEND_KEYS[:3]:
                    found.spend[key] += float(event.data.get(key, 0))
                found.spend["calls"] += 1
        if len(events) < PAGE:
            return found
        after = events[-1].seq


def adopted(store: Store, plan: Plan) -> Plan | None:
    """The child team's plan if it was planned already: the plan written then, or
    (tasks in the register but no plan written) the empty plan, which adopts them."""
    written = read_log(store, plan.team).plan
    if written is not None:
        return written
    return plan if store.tasks(plan.team) else None


def plan_once(
    store: Store,
    member: str,
    planner: Planner | None,
    plan: Plan,
    section: SubTeam,
    workdir: Path | None = None,
) -> Plan:
    """The goal-only child team's plan: adopted if planned before, else planned now.

    Raises a TenureError with the reason (no model, no valid plan, a missing artifact)."""
    found = adopted(store, plan)
    if found is not None:
        return found
    if planner is None:
        raise ConfigError(
            f"nested team {plan.team} has no tasks and sub-leader {member} has no model to "
            "plan it: start it with --model or set TENURE_MODEL"
        )

    def record(kind: str, data: dict[str, Any]) -> None:
        store.append_event(plan.team, kind, {"member": member, **data})

    fresh = replace(planner, on_event=record, meter=Meter())
    made = fresh.plan(
        plan.goal,
        artifacts_from(section.artifacts, workdir),
        team=plan.team,
        max_attempts=plan.max_attempts,
        budget=to_dict(plan.budget) if plan.budget is not None else None,
        workdir=workdir,
    )
    made = made.model_copy(update={"policies": plan.policies})
    record(PLANNED, {"plan": to_dict(made), "tasks": len(made.tasks)})
    first = read_log(store, plan.team).plan  # two racing planners: the first one wins
    return first or made


def unreported_spend(
    store: Store, team: str, children: list[Task], reported: list[SpendEntry]
) -> Spend | None:
    """The nested team's spend, its planning included, not yet reported upward."""
    try:
        planning = read_log(store, team).spend
    except TenureError:
        planning = {}
    return nested_spend(children, reported, planning)
