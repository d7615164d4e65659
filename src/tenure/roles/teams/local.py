"""``local`` mode: a leader and its workers as threads of one process.

There is no election here because there is nothing to partition: if the
process dies, the whole team dies with it. The leader still claims the lease
and every write is still fenced, so a local run can be resumed by ``tenure
run`` or taken over by a ``tenure leader`` on the same store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tenure.coord import LeaseTiming
from tenure.executors import Executor
from tenure.protocol import Plan
from tenure.protocol.errors import StoreLost
from tenure.protocol.plan import plan_executors
from tenure.roles.features import Splitter
from tenure.roles.leader import LeaderConfig, LeaderHook, Outcome
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.teams.leader import Leader
from tenure.store import Store
from tenure.verify import Trust

FOLLOWERS_GRACE = 10.0
"""Seconds the worker threads have, together, to end their attempts once the run stops
(an executor that ignores ``ctx.cancelled`` is left running; its claim lapses)."""


@dataclass
class LocalTeam:
    store: Store
    plan: Plan
    executor: Executor
    workers: int = 2
    concurrency: int = 1  # attempts each worker runs at once (its slots)
    timing: LeaseTiming = LeaseTiming()
    state_dir: Path | None = None
    workdir: Path | None = None
    leader_id: str = "leader"
    splitter: Splitter | None = None  # splits a task out of attempts, once
    trust: Trust | None = None  # judge models for the leader's verification ladder
    hooks: Sequence[LeaderHook] = ()  # the caller's own leader hooks

    def run(self, stop: threading.Event | None = None, *, timeout: float | None = None) -> Outcome:
        """Lead until nothing can move without a person (``settled``: tasks may wait
        in the inbox; ``Team.run()`` reads which), or ``stop`` is set or ``timeout``
        seconds pass (``stopped``)."""
        stop = stop or threading.Event()
        timer = threading.Timer(timeout, stop.set) if timeout is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            return self._run(stop)  # traced as the leader's term: its envelopes carry it
        finally:
            if timer is not None:
                timer.cancel()

    def _run(self, stop: threading.Event) -> Outcome:
        followers_stop = threading.Event()
        team = self.plan.team
        # every thread runs the same executor, so each can do what the plan asks
        capabilities = tuple(sorted({t.capability for t in self.plan.tasks if t.capability}))
        followers = [
            Follower(
                self.store,
                FollowerConfig(
                    team=team,
                    member_id=f"worker-{n}",
                    capabilities=capabilities,
                    state_dir=self.state_dir,
                    workdir=self.workdir,
                    poll_interval=0.01,
                    allowed_executors=plan_executors(self.plan),  # the operator's plan
                    await_id=True,  # a resumed run waits out a dead one's workers
                    concurrency=self.concurrency,
                ),
                self.executor,
            )
            for n in range(1, self.workers + 1)
        ]
        threads = [
            threading.Thread(
                target=_follow,
                args=(f, followers_stop),
                daemon=True,
                name=f"tenure-{f.me}",
            )
            for f in followers
        ]
        for thread in threads:
            thread.start()
        leader = Leader(
            self.store,
            LeaderConfig(
                team=team,
                member_id=self.leader_id,
                timing=self.timing,
                elect=False,
                state_dir=self.state_dir,
                workdir=self.workdir,
                poll_interval=0.01,
                trust=self.trust,
            ),
            self.plan,
            splitter=self.splitter,
            hooks=self.hooks,
        )
        try:
            return leader.lead(stop)
        finally:
            followers_stop.set()  # each cancels what it has in hand, releases it and leaves
            deadline = time.monotonic() + FOLLOWERS_GRACE  # one grace for them all
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _follow(follower: Follower, stop: threading.Event) -> None:
    """A worker thread: a lost store ends it quietly; the leader, on the same store,
    raises it to the caller."""
    try:
        follower.run(stop)
    except StoreLost:
        stop.set()
