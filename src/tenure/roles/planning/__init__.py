"""Planning: an LLM planner turns a goal and the artifacts a team can reach into a
plan (and splits a task that ran out of attempts), under rules checked before
anything is dispatched — among them what a model may not write (``limits``)."""

from tenure.roles.planning.artifacts import MAX_LISTED, Artifact, ArtifactKind, artifacts_from
from tenure.roles.planning.checks import PlanRejected, check_plan, references
from tenure.roles.planning.limits import (
    ALLOWABLE,
    Allowed,
    NotAllowed,
    allowance,
    check_model_output,
)
from tenure.roles.planning.planner import (
    PLANNER_SYSTEM,
    Planner,
    PlanningFailed,
    plan_schema,
    planner_system,
)

__all__ = [
    "ALLOWABLE",
    "MAX_LISTED",
    "PLANNER_SYSTEM",
    "Allowed",
    "Artifact",
    "ArtifactKind",
    "NotAllowed",
    "PlanRejected",
    "Planner",
    "PlanningFailed",
    "allowance",
    "artifacts_from",
    "check_model_output",
    "check_plan",
    "plan_schema",
    "planner_system",
    "references",
]
