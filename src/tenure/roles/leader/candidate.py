"""A leader candidate: wins the lease by rank, conducts while it holds it, and
stops acting the instant its own deadline passes without a renewal.

``Candidate`` runs whatever hooks it is given; ``tenure.roles.teams.Leader`` is the
candidate with the standard leader features."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tenure.coord import (
    LEAD_CAPABILITY,
    Credentials,
    Election,
    EpochMemory,
    LeaseKeeper,
    LeaseTiming,
)
from tenure.executors.paths import check_task_paths
from tenure.protocol import Plan, TenureError
from tenure.protocol.errors import LeaseLost, StaleEpoch
from tenure.roles.leader.conductor import Conductor
from tenure.roles.leader.hooks import Hooks, LeaderHook
from tenure.roles.member.heartbeat import MemberHeartbeat
from tenure.store import Lease, Store
from tenure.verify import Trust

Outcome = Literal["finished", "stopped"]


@dataclass
class LeaderConfig:
    team: str
    member_id: str
    priority: int = 0
    timing: LeaseTiming = field(default_factory=LeaseTiming)
    election_backoff: float = 0.5
    poll_interval: float = 0.02
    member_ttl: float = 3.0
    stale_grace: float = 2.0
    state_dir: Path | None = None
    workdir: Path | None = None
    exit_when_done: bool = True
    duplicate_assignments: bool = False
    elect: bool = True
    trust: Trust | None = None  # judge models for the verification ladder
    credentials: Credentials | None = None  # the leading role's; None: unsigned
    one_term: bool = False  # stop after the first term instead of campaigning again
    release_on_exit: bool = True  # False: the caller releases the lease (after its own work)


class Candidate:
    def __init__(
        self,
        store: Store,
        config: LeaderConfig,
        plan: Plan | None = None,
        *,
        hooks: Sequence[LeaderHook] = (),
        keeper: LeaseKeeper | None = None,
    ) -> None:
        self.store = store
        self.hooks = list(hooks)
        if plan is not None:
            Hooks(self.hooks).check_options(plan)  # refused now, not at every election
            check_task_paths(plan.tasks, config.workdir)  # scopes and outputs inside it
        self.config = config
        self.plan = plan
        self.team = config.team
        self.me = config.member_id
        self.memory = EpochMemory.for_member(config.state_dir, config.team, config.member_id)
        # a keeper given here may hold the lease already: the first term uses it
        self.keeper = keeper or LeaseKeeper(store, config.team, config.member_id, config.timing)
        self.election = Election(store, self.keeper, backoff=config.election_backoff)
        self.heartbeat = MemberHeartbeat(
            store,
            config.team,
            self.me,
            ttl=config.member_ttl,
            priority=config.priority,
            capabilities=(LEAD_CAPABILITY,),
            memory=self.memory,
        )
        self.terms = 0
        self.stepped_down: str | None = None  # the last term lost the lease: why
        self.failure: str | None = None  # the last term ended on an error: which

    def run(self, stop: threading.Event) -> Outcome:
        """Campaign and lead until the plan is finished (or ``stop`` is set)."""
        if self.config.elect:
            self.heartbeat.start()
        renewer = self.keeper.keep_renewed()
        try:
            while not stop.is_set():
                if self._campaign() and self._lead(stop) == "finished":
                    return "finished"
                if self.config.one_term and self.terms:
                    break
                stop.wait(self.config.poll_interval * 4)
            return "stopped"
        finally:
            stop.set()
            renewer.stop()
            if self.config.release_on_exit:
                self.keeper.release()
            if self.config.elect:
                self.heartbeat.stop(leave=True)

    def _campaign(self) -> bool:
        lease: Lease | None
        try:
            if self.keeper.valid() and self.terms == 0:
                lease = self.keeper.lease  # claimed by the caller before the first term
            elif not self.config.elect:
                lease = self.keeper.claim(at_least=self.memory.highest)
            else:
                lease = self.election.try_lead(self.memory.highest)
        except TenureError:
            return False
        if lease is None:
            return False
        self.memory.observe(lease.epoch)
        self.terms += 1
        self._event("leader.elected", {"priority": self.config.priority}, lease.epoch)
        return True

    def _lead(self, stop: threading.Event) -> Outcome | None:
        conductor = Conductor(
            self.store,
            self.team,
            self.me,
            self.keeper.check,
            workdir=self.config.workdir,
            stale_grace=self.config.stale_grace,
            duplicate=self.config.duplicate_assignments,
            hooks=self.hooks,
            trust=self.config.trust,
            credentials=self.config.credentials,
        )
        try:
            conductor.load(self.plan)
            conductor.adopt()
            while not stop.is_set():
                if not conductor.tick():
                    if self.config.exit_when_done and conductor.finished():
                        # only a leader still inside its deadline may say so: one
                        # paused mid-tick wakes to a plan its successor finished
                        epoch = self.keeper.check()
                        self._event("leader.plan_finished", {}, epoch)
                        return "finished"
                    stop.wait(self.config.poll_interval)
        except (LeaseLost, StaleEpoch) as exc:
            if isinstance(exc, StaleEpoch):
                self.memory.observe(exc.current)  # the next claim starts above it
                self.keeper.release()
            self.keeper.lost()
            self.stepped_down = str(exc)
            self._event("leader.stepped_down", {"reason": str(exc)}, None)
        except TenureError as exc:
            self.keeper.lost()
            self.failure = str(exc)
            self._event("leader.error", {"error": str(exc)}, None)
            time.sleep(self.config.poll_interval)
        return None

    def _event(self, kind: str, data: dict[str, object], epoch: int | None) -> None:
        try:
            self.store.append_event(self.team, kind, {"leader": self.me, **data}, epoch=epoch)
        except TenureError:
            pass  # best effort while the store is unreachable
