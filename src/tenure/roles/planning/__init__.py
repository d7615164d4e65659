"""Planning: an LLM planner turns a goal and the artifacts a team can reach into a
plan (and splits a task that ran out of attempts), under rules checked before
anything is dispatched."""

from tenure.roles.planning.artifacts import MAX_LISTED, Artifact, ArtifactKind, artifacts_from
from tenure.roles.planning.checks import PlanRejected, check_plan, references
from tenure.roles.planning.planner import PLANNER_SYSTEM, Planner, PlanningFailed, plan_schema

__all__ = [
    "MAX_LISTED",
    "PLANNER_SYSTEM",
    "Artifact",
    "ArtifactKind",
    "PlanRejected",
    "Planner",
    "PlanningFailed",
    "artifacts_from",
    "check_plan",
    "plan_schema",
    "references",
]
