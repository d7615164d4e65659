"""A plan in the register: registering its tasks, and knowing when a register has
nothing left that can move without a person.

Kept apart from the conductor because queue mode, sub-leaders and the console use
both without conducting anything.
"""

from __future__ import annotations

from tenure.protocol import Plan
from tenure.protocol.taskspec import spec_for
from tenure.roles.register.access import Register
from tenure.roles.register.task import Task

__all__ = ["OPEN_STATES", "WAITING_STATES", "register_plan", "plan_settled"]

OPEN_STATES = ("queued", "running", "review")
WAITING_STATES = ("blocked", "failed")  # in the inbox: waiting for a person


def register_plan(register: Register, plan: Plan, known: set[str]) -> list[Task]:
    """Register the plan's tasks that are not ``known`` yet, all in one atomic step (a
    leader killed while loading leaves every task or none); returns those created.
    One a racing leader registered a moment ago is left as it is."""
    return register.create_all([(t.id, spec_for(plan, t)) for t in plan.tasks if t.id not in known])


def plan_settled(tasks: list[Task]) -> bool:
    """True when each task is settled, or queued behind a dependency that is
    itself waiting for a person (a task set aside as tampered with waits for one too)."""
    stuck = {t.task_id for t in tasks if t.state not in OPEN_STATES and not t.is_done}
    grew = True
    while grew:
        grew = False
        for t in tasks:
            if t.task_id not in stuck and t.state == "queued" and stuck.intersection(
                t.spec.depends_on
            ):
                stuck.add(t.task_id)
                grew = True
    return all(t.state not in OPEN_STATES or t.task_id in stuck for t in tasks)
