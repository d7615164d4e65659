"""Leader features, each a hook the conductor calls at fixed points: budgets, quorum,
split-before-inbox, and the parent's side of nested teams."""

from __future__ import annotations

from tenure.roles.features.budget import BudgetHook
from tenure.roles.features.nested import SILENT_GRACE_FACTOR, NestedTeamsHook
from tenure.roles.features.quorum import QuorumHook
from tenure.roles.features.split import SplitHook, Splits, Splitter
from tenure.roles.leader import LeaderHook

__all__ = [
    "BudgetHook",
    "NestedTeamsHook",
    "QuorumHook",
    "SplitHook",
    "Splits",
    "Splitter",
    "standard_hooks",
]


def standard_hooks(*, stale_grace: float = 2.0, splitter: Splits | None = None) -> list[LeaderHook]:
    """The features every team has, in the order the conductor calls them: nested teams
    (a composite task's child team), quorum rounds and splits (both hold tasks back
    from plain dispatch), then budgets (which stop a task that may not spend more)."""
    return [
        NestedTeamsHook(grace=SILENT_GRACE_FACTOR * stale_grace),
        QuorumHook(),
        SplitHook(splitter),
        BudgetHook(),
    ]
