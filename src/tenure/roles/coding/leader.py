"""A coding run: a team ``code/RUN`` on the standard runtime, laid out as files in git.

``CodingLeader`` claims the run's lease, opens the run (starts it, resumes it from
the register, or rebuilds a lost register from ``status.yml``), then runs the
standard leader — the same conductor, ladder, budgets, retries, split, inbox and
fencing as every team — with the coding ``IntegrationHook``, and one follower
per worker slot whose executor runs the agent CLI in the attempt's worktree
(``WorktreeAgent``). The leader and its workers are threads of this process, so
an attempt cannot outlive its leader's process unnoticed: a new leader counts
it as interrupted.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, replace

from tenure.coord import LeaseKeeper, LeaseTiming, Renewer
from tenure.executors import git
from tenure.executors.containment import Guard
from tenure.protocol import Plan
from tenure.protocol.codec import load_plan
from tenure.protocol.errors import ConfigError, TenureError
from tenure.protocol.private import private_dir
from tenure.roles.coding.config import CodingConfig, CodingOutcome, new_run_id, preflight
from tenure.roles.coding.files import status_epoch
from tenure.roles.coding.integration import IntegrationHook
from tenure.roles.coding.lease import claim_run, default_store_url, holder_id, team_for
from tenure.roles.coding.offline import OfflineLead
from tenure.roles.coding.rebuild import rebuild
from tenure.roles.coding.replan import PID_FILE, ReplanRequest, apply_replan
from tenure.roles.coding.run import RunPlace
from tenure.roles.coding.scope import overlapping_scopes
from tenure.roles.coding.split import CodingSplits
from tenure.roles.coding.worker import WorktreeAgent
from tenure.roles.features import standard_hooks
from tenure.roles.leader import Candidate, Hooks, LeaderConfig, LeaderHook
from tenure.roles.leader.hooks import check_options
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.register import register_plan
from tenure.roles.teams.result import read_result
from tenure.store import Store, open_store

__all__ = ["CodingLeader", "check_coding_plan"]

STALE_GRACE = 10.0  # seconds past a deadline before the leader gives up on an attempt
FOLLOWER_JOIN = 30.0


@dataclass
class _Lead:
    """The run's open store and lease while this leader holds it."""

    store: Store
    keeper: LeaseKeeper
    renewer: Renewer


def check_coding_plan(plan: Plan, hooks: Sequence[LeaderHook] = ()) -> None:
    """Refuse, with one line, a plan naming an option no feature of a coding leader
    reads: the standard features, the integration hook and ``hooks`` (the caller's)."""
    check_options(plan, Hooks([*standard_hooks(), *hooks]).options() | IntegrationHook.options)


class CodingLeader:
    def __init__(self, config: CodingConfig) -> None:
        self.config = config
        check_coding_plan(config.plan, config.hooks)  # before any worktree or store
        self.root = preflight(config)
        if config.agent_mcp:  # the caller's config is left as it was
            config = replace(config, agent=config.agent.with_mcp())
        self.config = config
        self.run_id = config.run_id or new_run_id()
        self.team = team_for(self.run_id)
        self.integration = f"tenure/{self.run_id}/integration"
        self.store_url = config.store_url or default_store_url(self.root)
        self.timing = LeaseTiming(ttl=config.lease_ttl)
        self._lead: _Lead | None = None

    # --- the lease ---------------------------------------------------------------------

    def claim(self) -> int:
        """Take the run's lease before touching anything (``RunLeased`` while another
        leader holds it), above every epoch status.yml in git records."""
        if self._lead is not None and self._lead.keeper.valid():
            return self._lead.keeper.epoch
        store = open_store(self.store_url)
        try:
            keeper = claim_run(store, self.run_id, self.timing, at_least=self._git_epoch())
        except TenureError:
            store.close()
            raise
        self._lead = _Lead(store, keeper, keeper.keep_renewed())
        return keeper.epoch

    def _git_epoch(self) -> int:
        if not git.branch_exists(self.root, self.integration):
            return 0
        path = f"{self.integration}:.tenure/runs/{self.run_id}/status.yml"
        text = git.git(self.root, "show", path, check=False)
        return status_epoch(text) if text else 0

    def _release(self) -> None:
        lead, self._lead = self._lead, None
        if lead is None:
            return
        lead.renewer.stop()
        lead.keeper.release()
        lead.store.close()

    # --- a run -------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> CodingOutcome:
        started = time.monotonic()
        stop = stop or threading.Event()
        self.claim()
        assert self._lead is not None
        lead = self._lead
        try:
            place, hook = self._open(lead)
        except BaseException:
            self._release()
            raise
        pid_file = place.attempts / PID_FILE
        private_dir(pid_file.parent)
        pid_file.write_text(f"{os.getpid()}\n")
        followers, threads, followers_stop = self._workers(lead.store, place)
        candidate = Candidate(
            lead.store,
            LeaderConfig(
                team=self.team,
                member_id=holder_id(),
                timing=self.timing,
                elect=False,
                one_term=True,
                release_on_exit=False,
                workdir=place.int_path,
                stale_grace=STALE_GRACE + self.config.agent.grace_seconds,
                poll_interval=0.05,
                trust=self.config.trust,
            ),
            hooks=[*standard_hooks(splitter=self._splitter()), hook, *self.config.hooks],
            keeper=lead.keeper,
        )
        lead.renewer.stop()  # the candidate keeps the lease renewed from here
        try:
            candidate.lead(stop)
            outcome = self._outcome(place, hook, candidate, stop)
            result = read_result(lead.store, self.team, seconds=time.monotonic() - started)
            return replace(outcome, result=result)
        finally:
            for follower in followers:
                follower.cancel_current()  # their work stays committed on their branches
            followers_stop.set()
            for thread in threads:
                thread.join(timeout=FOLLOWER_JOIN)
            pid_file.unlink(missing_ok=True)
            self._release()

    def _outcome(
        self, place: RunPlace, hook: IntegrationHook, candidate: Candidate, stop: threading.Event
    ) -> CodingOutcome:
        if hook.outcome is not None:
            return hook.outcome
        states = {k: r.state for k, r in place.rows.items()}
        args = (self.run_id, False, self.integration, place.int_path, states)
        why = candidate.stepped_down or candidate.failure
        if why is not None and candidate.stepped_down:
            with suppress(TenureError):  # a fact, not a write to the run: unfenced
                place.store.append_event(
                    self.team,
                    "code.lease_lost",
                    {"holder": holder_id(), "epoch": candidate.keeper.epoch, "why": why},
                )
            return CodingOutcome(*args, f"stopped: this leader lost the lead of {self.team} ({why})")
        if why is not None:
            return CodingOutcome(*args, f"stopped: {why}")
        return CodingOutcome(*args, "stopped; resume with the same run id")

    def _workers(
        self, store: Store, place: RunPlace
    ) -> tuple[list[Follower], list[threading.Thread], threading.Event]:
        stop = threading.Event()
        followers = [
            Follower(
                store,
                FollowerConfig(
                    team=self.team,
                    member_id=f"worker-{slot + 1}",
                    poll_interval=0.02,
                    visibility_timeout=60.0,
                    checkin_interval=30.0,
                    await_id=True,  # a resumed run waits out a dead one's workers
                ),
                WorktreeAgent(
                    self.root,
                    self.run_id,
                    self.config.agent,
                    slot,
                    self.config.port_first,
                    guard=place.guard,
                    store=store,
                ),
            )
            for slot in range(self.config.workers)
        ]
        threads = [
            threading.Thread(target=f.run, args=(stop,), daemon=True, name=f"tenure-{f.me}")
            for f in followers
        ]
        for thread in threads:
            thread.start()
        return followers, threads, stop

    def _splitter(self) -> CodingSplits | None:
        return CodingSplits(self.config.splitter) if self.config.splitter is not None else None

    # --- opening a run -----------------------------------------------------------------

    def _open(self, lead: _Lead) -> tuple[RunPlace, IntegrationHook]:
        """Start the run, or resume it: from the register, or from status.yml in git
        when the store lost it (the register is rebuilt from the file)."""
        place = RunPlace(
            self.root,
            self.run_id,
            lead.store,
            lead.keeper.check,
            self.config.plan,
            port_first=self.config.port_first,
        )
        if git.branch_exists(self.root, self.integration):
            self._resume(place)
        else:
            self._start(place)
        # the baseline of what agents may not change: taken before any agent of this
        # leader runs (a resumed leader takes it afresh: see docs, containment)
        place.guard = Guard(
            self.root,
            quarantine=place.attempts / "quarantine",
            integration=place.int_path,
            continuous=not self.config.agent.sandboxed(),
        )
        return place, IntegrationHook(place)

    def _start(self, place: RunPlace) -> None:
        git.worktree_add(self.root, place.int_path, self.integration, "HEAD")
        place.tip = git.head(place.int_path)
        place.folder.epoch = place.epoch()
        place.folder.write_plan(place.plan)
        for warning in overlapping_scopes(place.plan):
            place.folder.append_changelog(f"warning: {warning}")
        place.folder.append_changelog(self.config.agent.sandbox_note())
        register_plan(place.register, place.plan, {t.task_id for t in place.register.tasks()})
        place.commit(f"tenure: start {self.run_id}")
        place.event("started", tasks=len(place.plan.tasks), holder=holder_id())

    def _resume(self, place: RunPlace) -> None:
        if not place.int_path.exists():
            git.git(self.root, "worktree", "prune")
            git.git(self.root, "worktree", "add", "-q", str(place.int_path), self.integration)
        place.tip = git.head(place.int_path)
        rows = place.folder.read_status() if place.folder.exists() else {}
        place.rows = dict(rows)
        if (place.folder.path / "plan.md").exists():
            place.plan = load_plan(place.folder.path / "plan.md")  # the run's own plan
        tasks = place.register.tasks()
        rebuilt = not tasks and bool(rows)
        if rebuilt:
            rebuild(place.register, place.plan, rows)
        register_plan(place.register, place.plan, {t.task_id for t in place.register.tasks()})
        note = "; the store had lost it: register rebuilt from status.yml" if rebuilt else ""
        epoch = place.epoch()
        place.folder.append_changelog(f"run resumed from status.yml (epoch {epoch}){note}")
        place.folder.append_changelog(self.config.agent.sandbox_note())
        place.commit("tenure: resume run")
        kind = "rebuilt" if rebuilt else "resumed"
        place.event(kind, tasks=len(rows), source="status.yml", holder=holder_id())

    # --- replanning without a running leader ------------------------------------------

    def replan(self, request: ReplanRequest) -> list[str]:
        """Apply a replan with no leader running: to the register and the files in git,
        for the next resume. Takes the run's lease for the change."""
        if not git.branch_exists(self.root, self.integration):
            raise ConfigError(f"no run {self.run_id!r} in {self.root} (no {self.integration})")
        self.claim()
        assert self._lead is not None
        try:
            place, hook = self._open(self._lead)
            OfflineLead(place, holder_id(), [hook]).settle()  # what a killed leader left
            return apply_replan(place, request)
        finally:
            self._release()
