"""A leader candidate: wins the lease by rank, conducts while it holds it, and
stops acting the instant its own deadline passes without a renewal.

``Candidate`` runs whatever hooks it is given; ``tenure.roles.teams.Leader`` is the
candidate with the standard leader features, whose ``run()`` says how the run ended.
``lead()`` ends ``settled`` when nothing can move without a person — which is not the
work being done: tasks may wait in the inbox — or ``stopped``."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tenure import observe
from tenure.coord import (
    LEAD_CAPABILITY,
    Credentials,
    Election,
    EpochMemory,
    LeaseKeeper,
    LeaseProofs,
    LeaseTiming,
)
from tenure.executors.paths import check_task_paths
from tenure.protocol import Plan, TenureError
from tenure.protocol.errors import LeaseLost, StaleEpoch, StoreLost
from tenure.roles.leader.conductor import Conductor
from tenure.roles.leader.hooks import Hooks, LeaderHook
from tenure.roles.member.heartbeat import MemberHeartbeat
from tenure.roles.member.wire import RECEIVE_WAIT
from tenure.roles.register import Task
from tenure.store import Lease, Store
from tenure.verify import Trust

Outcome = Literal["settled", "stopped"]


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
        self.keeper = keeper or LeaseKeeper(
            store,
            config.team,
            config.member_id,
            config.timing,
            proofs=LeaseProofs.of(config.credentials),  # None unsigned: leases as plain data
        )
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
        self.settled = False  # the last lead() ended with the plan settled
        self.stepped_down: str | None = None  # the last term lost the lease: why
        self.failure: str | None = None  # the last term ended on an error: which

    def lead(self, stop: threading.Event) -> Outcome:
        """Campaign and lead until the plan is settled (or ``stop`` is set)."""
        self.settled = False
        if self.config.elect:
            self.heartbeat.start()
        renewer = self.keeper.keep_renewed()
        try:
            while not stop.is_set():
                if self._campaign() and self._term(stop) == "settled":
                    self.settled = True
                    return "settled"
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
                lease = self.election.claim_now(self.memory.highest)
            else:
                lease = self.election.try_lead(self.memory.highest)
        except StoreLost:
            raise  # the store is not the team's any more: nothing to campaign for
        except TenureError:
            return False
        if lease is None:
            return False
        self.memory.observe(lease.epoch)
        self.terms += 1
        self._event("leader.elected", {"priority": self.config.priority}, lease.epoch)
        return True

    def _term(self, stop: threading.Event) -> Outcome | None:
        """One term, traced as a run of the team (``invoke_workflow``): the envelopes
        sent in it carry its span, so the workers' attempts, in their own processes,
        and this leader's verifications are one trace."""
        with observe.run(self.team) as span:
            span.set("tenure.epoch", self.keeper.epoch or None)
            said = (self.stepped_down, self.failure)
            outcome = self._lead(stop)
            ended: str
            if outcome is not None:
                ended = outcome
            elif self.failure is not said[1]:
                ended = "error"
            elif self.stepped_down is not said[0]:
                ended = "stepped_down"
            else:
                ended = "stopped"
            span.set("tenure.outcome", ended)
        return outcome

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
            idle = False  # after an idle round the next one waits for results to come
            while not stop.is_set():
                started = time.monotonic()
                if conductor.tick(wait=RECEIVE_WAIT if idle else 0.0):
                    idle = False
                else:
                    if self.config.exit_when_done and conductor.finished():
                        # only a leader still inside its deadline may say so: one
                        # paused mid-tick wakes to a plan its successor settled
                        epoch = self.keeper.check()
                        self._confirm_store()
                        counts = _counts(conductor.tasks())
                        self._event("leader.plan_settled", {"counts": counts}, epoch)
                        return "settled"
                    if idle:  # the round waited already, unless it came back at once
                        stop.wait(self.config.poll_interval - (time.monotonic() - started))
                    idle = True
        except (LeaseLost, StaleEpoch) as exc:
            self.keeper.note_taken()  # our own id at another epoch: say so
            if isinstance(exc, StaleEpoch):
                self.memory.observe(exc.current)  # the next claim starts above it
                self.keeper.release()
            self.keeper.lost()
            self.stepped_down = str(exc)
            self._event("leader.stepped_down", {"reason": str(exc)}, None)
        except StoreLost:
            self.keeper.lost()
            raise  # a replaced store's register is not this plan's: never "settled"
        except TenureError as exc:
            lapsed = not self.keeper.valid()  # the store was away past the lease deadline
            self.keeper.lost()
            if lapsed:
                self.stepped_down = f"its lease deadline passed: {exc}"
                self._event("leader.stepped_down", {"reason": self.stepped_down}, None)
            else:
                self.failure = str(exc)
                self._event("leader.error", {"error": str(exc)}, None)
            time.sleep(self.config.poll_interval)
        return None

    def _confirm_store(self) -> None:
        """``StoreLost`` if the store was replaced under this leader: the register it
        read as finished may be a stranger's, or what its connection still caches."""
        reason = self.store.lost_reason()
        if reason is not None:
            raise StoreLost(reason)

    def _event(self, kind: str, data: dict[str, object], epoch: int | None) -> None:
        try:
            self.store.append_event(self.team, kind, {"leader": self.me, **data}, epoch=epoch)
        except TenureError:
            pass  # best effort while the store is unreachable


def _counts(tasks: list[Task]) -> dict[str, int]:
    """Tasks by state: what a settled plan came to (done, or waiting for a person)."""
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.state] = counts.get(task.state, 0) + 1
    return dict(sorted(counts.items()))
