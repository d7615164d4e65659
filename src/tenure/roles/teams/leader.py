"""A leader with the standard features: the candidate that campaigns for a team's
lease and conducts it, with budgets, quorum, nested teams and (given a splitter)
split-before-inbox, plus any hooks of the caller's own. ``run()`` returns how the
run ended as the register holds it (``RunResult``, as ``Team.run()`` does): never
"done" while a task waits for a person."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from tenure.protocol import Plan
from tenure.protocol.plan import subteam_plan
from tenure.roles.features import Splitter, standard_hooks
from tenure.roles.leader import Candidate, Hooks, LeaderConfig, LeaderHook
from tenure.roles.leader.hooks import check_options
from tenure.roles.teams.result import RunResult, read_result
from tenure.store import Store

__all__ = ["Leader", "check_leader_plan"]


def check_leader_plan(
    plan: Plan, *, splitter: Splitter | None = None, hooks: Sequence[LeaderHook] = ()
) -> None:
    """Refuse, with one line, a plan whose tasks name an option no feature of its leader
    reads (the standard ones and ``hooks``), and in every nested team an option the
    standard features do not read (its sub-leader runs those): what a leader refuses
    when it loads the plan, said before anything looks at the store."""
    standard = standard_hooks(splitter=splitter)
    check_options(plan, Hooks([*standard, *hooks]).options())
    _check_nested(plan, Hooks(standard).options(), "")


def _check_nested(plan: Plan, known: frozenset[str], where: str) -> None:
    for index, task in enumerate(plan.tasks):
        if task.team is not None:
            here = f"{where}tasks[{index}].team."
            child = subteam_plan(plan.team, task)
            check_options(child, known, where=here)
            _check_nested(child, known, here)


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

    def run(
        self, stop: threading.Event | None = None, *, timeout: float | None = None
    ) -> RunResult:
        """Campaign and lead until nothing can move without a person, ``stop`` is set
        or ``timeout`` seconds pass; then the run as its register holds it: ``done``
        only when every task is done (see ``RunResult``)."""
        started = time.monotonic()
        stop = stop or threading.Event()
        timer = threading.Timer(timeout, stop.set) if timeout is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            self.lead(stop)
        finally:
            if timer is not None:
                timer.cancel()
        return read_result(self.store, self.team, seconds=time.monotonic() - started)
