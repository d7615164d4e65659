"""Coding-agent teams on the standard runtime: one git worktree per attempt, the
leader's own checks on the attempt's branch, scope enforcement, integration in
plan order, and the run laid out as files in git (``plan.md``, ``tasks/``,
``results/``, ``status.yml``), a projection of the run's register."""

from tenure.roles.coding.config import CodingConfig, CodingOutcome, preflight
from tenure.roles.coding.files import RunFolder, StatusRow
from tenure.roles.coding.leader import CodingLeader, check_coding_plan
from tenure.roles.coding.lease import RunLeased, team_for

__all__ = [
    "CodingConfig",
    "CodingLeader",
    "CodingOutcome",
    "RunFolder",
    "RunLeased",
    "StatusRow",
    "check_coding_plan",
    "preflight",
    "team_for",
]
