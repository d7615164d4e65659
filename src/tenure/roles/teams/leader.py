"""A leader with the standard features: the candidate that campaigns for a team's
lease and conducts it, with budgets, quorum, nested teams and (given a splitter)
split-before-inbox, plus any hooks of the caller's own."""

from __future__ import annotations

from collections.abc import Sequence

from tenure.protocol import Plan
from tenure.roles.features import Splitter, standard_hooks
from tenure.roles.leader import Candidate, LeaderConfig, LeaderHook
from tenure.store import Store

__all__ = ["Leader"]


class Leader(Candidate):
    def __init__(
        self,
        store: Store,
        config: LeaderConfig,
        plan: Plan | None = None,
        *,
        splitter: Splitter | None = None,
        hooks: Sequence[LeaderHook] = (),
    ) -> None:
        features = standard_hooks(stale_grace=config.stale_grace, splitter=splitter)
        super().__init__(store, config, plan, hooks=[*features, *hooks])
