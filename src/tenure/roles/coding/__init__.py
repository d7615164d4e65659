"""Coding-agent teams: the run folder in git, one worktree per attempt, leader-side
acceptance in the worktree, scope enforcement and integration in plan order."""

from tenure.roles.coding.files import RunFolder, StatusRow
from tenure.roles.coding.leader import CodingConfig, CodingLeader, CodingOutcome, preflight

__all__ = [
    "CodingConfig",
    "CodingLeader",
    "CodingOutcome",
    "RunFolder",
    "StatusRow",
    "preflight",
]
