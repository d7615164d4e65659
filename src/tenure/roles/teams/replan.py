"""The operator's goal shift: ask the team's live leader to apply a new plan, or apply
it directly under the team's lease when no leader runs (queue mode: no lease at all).

Either way the same rules apply (``roles/leader/replan.py``), the new plan is checked
completely before anything is written, and the change is one settled revision of the
team's plan: applied, or refused with a reason, never half-applied.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tenure.coord import Credentials, LeaseKeeper, LeaseTiming
from tenure.protocol import Plan, ProtocolError, new_id, to_dict
from tenure.protocol.errors import ConfigError, Conflict
from tenure.roles.features import standard_hooks
from tenure.roles.leader import Hooks
from tenure.roles.leader.replan import PLAN_REQUEST, take_request
from tenure.roles.member import Mailbox
from tenure.roles.register import Register, read_task
from tenure.roles.register.revision import (
    PlanRequest,
    Revision,
    last_number,
    latest_revision,
    pending_request,
    plan_digest,
    revisions,
    write_request,
)
from tenure.roles.teams.queue import QUEUE_EPOCH, enqueue_attempt
from tenure.roles.teams.queue_plan import queue_hooks
from tenure.store import Store

__all__ = ["UNCHANGED", "Replanned", "check_new_plan", "replan"]

POLL = 0.1
CODING_PREFIX = "code/"
UNCHANGED = "unchanged"  # the team runs this very plan already: nothing was written


@dataclass(frozen=True)
class Replanned:
    """How a replan ended: the revision as settled, and who applied it."""

    revision: Revision
    applied_by: str  # "leader X", "directly", "directly (queue mode)", UNCHANGED


@dataclass
class _Applier:
    """The ``ReplanContext`` of an operator applying a plan itself."""

    store: Store
    team: str
    me: str
    register: Register
    keeper: LeaseKeeper | None = None

    def epoch(self) -> int:
        return self.keeper.check() if self.keeper is not None else QUEUE_EPOCH

    def now(self) -> float:
        return self.store.now()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"by": self.me, **data}, epoch=self.epoch())


def queue_team(store: Store, team: str) -> bool:
    """A queue-mode team: tasks, and no lease ever claimed (its writes carry epoch 1)."""
    return store.current_epoch(team) == 0 and bool(store.tasks(team))


def check_new_plan(store: Store, plan: Plan, credentials: Credentials | None = None) -> None:
    """Everything that would refuse ``plan`` for its team, before anything is written."""
    team = plan.team
    if team.startswith(CODING_PREFIX):  # its files in git change with it
        raise ConfigError(
            f"team {team!r} is a coding run: replan it with "
            f"`tenure replan PLAN --run {team[len(CODING_PREFIX):]} --workdir REPO`"
        )
    if not store.tasks(team) and last_number(store, team) == 0:
        raise ConfigError(f"team {team!r} has no plan in this store yet: run it first")
    Hooks(queue_hooks() if queue_team(store, team) else standard_hooks()).check_options(plan)
    if credentials is None and any(read_task(r).spec.signature for r in store.tasks(team)):
        raise ConfigError(
            f"team {team!r} is signed: its replan must be signed with the team's lead key "
            "(--keys DIR)"
        )
    if queue_team(store, team):
        for index, task in enumerate(plan.tasks):
            if task.depends_on:
                raise ProtocolError(
                    f"tasks[{index}].depends_on", "no dependencies in a queue-mode team"
                )


def replan(
    store: Store,
    plan: Plan,
    *,
    reason: str = "",
    cancel_running: bool = False,
    credentials: Credentials | None = None,
    by: str = "operator",
    timeout: float = 60.0,
    lease_ttl: float = 3.0,
) -> Replanned:
    """Shift ``plan.team`` to ``plan``; returns once the revision is settled.
    ``credentials`` (the team's lead key) sign the request; ``ConfigError`` when the
    live leader did not take it within ``timeout`` (it stays pending for the next one)."""
    check_new_plan(store, plan, credentials)
    team = plan.team
    latest = latest_revision(store, team)
    if latest is not None and latest.digest == plan_digest(plan):
        return Replanned(latest, UNCHANGED)
    number = last_number(store, team) + 1
    if pending_request(store, team, number - 1) is not None:
        raise ConfigError(f"team {team!r}: a replan (revision {number}) is pending already")
    request = PlanRequest(
        revision=number,
        plan=to_dict(plan),
        reason=reason,
        cancel_running=cancel_running,
        by=by,
        at=store.now(),
    )
    if credentials is not None:
        signature = credentials.sign(PLAN_REQUEST, request.body())
        request = request.model_copy(update={"signature": to_dict(signature)})
    if queue_team(store, team):
        return _apply_queue(store, request, credentials)
    epoch = max(store.current_epoch(team), 1)
    if not write_request(store, team, request, epoch=epoch):
        raise ConfigError(f"team {team!r}: another replan took revision {number}; try again")
    return _settle(store, request, credentials, timeout, LeaseTiming(ttl=lease_ttl))


def _settle(
    store: Store,
    request: PlanRequest,
    credentials: Credentials | None,
    timeout: float,
    timing: LeaseTiming,
) -> Replanned:
    """Wait for the live leader to settle ``request``; apply it directly if none leads."""
    team = request.plan["team"]
    deadline = store.now() + timeout
    wait = threading.Event()
    while True:
        settled = _settled(store, team, request.revision)
        if settled is not None:
            return Replanned(settled, f"leader {settled.applied_by}")
        lease = store.current_lease(team)
        if lease is None:
            done = _apply_leased(store, request, credentials, timing)
            if done is not None:
                return done
        elif store.now() > deadline:
            raise ConfigError(
                f"team {team!r}: its leader {lease.holder} did not apply the replan within "
                f"{timeout:g}s; it stays pending (revision {request.revision}) for the leader"
            )
        wait.wait(POLL)


def _settled(store: Store, team: str, revision: int) -> Revision | None:
    return next((r for r in revisions(store, team) if r.revision == revision), None)


def _apply_leased(
    store: Store, request: PlanRequest, credentials: Credentials | None, timing: LeaseTiming
) -> Replanned | None:
    """Apply ``request`` holding the team's lease; None if a leader took the lease first."""
    team = request.plan["team"]
    keeper = LeaseKeeper(store, team, f"{request.by}-{new_id()[-6:].lower()}", timing)
    try:
        keeper.claim(at_least=store.current_epoch(team))
    except Conflict:
        return None
    renewer = keeper.keep_renewed()  # a large change outlasts one TTL
    try:
        register = Register(store, team, keeper.check, credentials)
        applier = _Applier(store, team, keeper.holder, register, keeper)
        if _settled(store, team, request.revision) is None:
            take_request(applier, request, credentials=credentials, check=_options)
    finally:
        renewer.stop()
        keeper.release()
    settled = _settled(store, team, request.revision)
    assert settled is not None
    return Replanned(settled, "directly")


def _apply_queue(
    store: Store, request: PlanRequest, credentials: Credentials | None
) -> Replanned:
    """A queue-mode team: applied at the queue's epoch; what it queues goes to the queue as
    a new attempt (the old envelope of a re-derived task is then outdated)."""
    team = request.plan["team"]
    if not write_request(store, team, request, epoch=QUEUE_EPOCH):
        raise ConfigError(f"team {team!r}: another replan took revision {request.revision}")
    register = Register(store, team, lambda: QUEUE_EPOCH, credentials, queue=True)
    applier = _Applier(store, team, request.by, register)
    revision = take_request(applier, request, credentials=credentials, check=_options)
    mailbox = Mailbox(store, team, request.by, credentials=credentials)
    fresh = {*revision.added, *revision.changed}
    for task in register.tasks():
        if task.task_id in fresh and task.state == "queued" and not task.assignee:
            enqueue_attempt(register, mailbox, task)
    return Replanned(revision, "directly (queue mode)")


def _options(plan: Plan) -> None:
    Hooks(queue_hooks()).check_options(plan)
