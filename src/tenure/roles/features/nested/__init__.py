"""Nested teams, the parent's side: following a composite task's child team (its
lease, stand-ins, stale reports), the roll-up a sub-leader reports, and the one-time
planning of a goal-only nested team. The sub-leader itself, a member that leads a
child team, is in ``roles.teams.subleader``."""

from tenure.roles.features.nested.parent import (
    SILENT_GRACE_FACTOR,
    NestedTeamsHook,
    stale_report,
    stood_in,
)
from tenure.roles.features.nested.planning import PLANNED, adopted, plan_once, unreported_spend
from tenure.roles.features.nested.rollup import nested_spend, rollup, waiting_question

__all__ = [
    "PLANNED",
    "SILENT_GRACE_FACTOR",
    "NestedTeamsHook",
    "adopted",
    "nested_spend",
    "plan_once",
    "rollup",
    "stale_report",
    "stood_in",
    "unreported_spend",
    "waiting_question",
]
