"""Starting a team's plan over (``--fresh``): its register cleared and its tasks
registered anew, under the team's lease (queue mode: at the queue's epoch).

Attempt numbers go on from where they were, so every idempotency key stays unique: a
new attempt is never answered from the ledger with an old result, and an envelope of
an old attempt still in a queue is outdated. The attempt counts are recorded in the
ledger before the register is cleared; a fresh start interrupted in between is
finished by the next ``--fresh`` (and nothing runs in the meantime: ``plan_standing``
says "interrupted"). Nested teams start over with their parent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tenure.coord import Credentials, LeaseKeeper, LeaseTiming
from tenure.protocol import Plan, new_id
from tenure.protocol.errors import ConfigError, Conflict
from tenure.protocol.plan import team_tree
from tenure.protocol.taskspec import spec_for
from tenure.protocol.words import counted
from tenure.roles.leader.replan import PLAN_UPDATE, update_event
from tenure.roles.register import Register, Task, plan_settled, read_task
from tenure.roles.register.revision import (
    Revision,
    interrupted_fresh,
    last_number,
    plan_digest,
    record_revision,
    write_fresh,
)
from tenure.roles.register.spend import team_totals
from tenure.roles.teams.queue import QUEUE_EPOCH
from tenure.store import Store

__all__ = ["FRESH_MODE", "start_over"]

FRESH = "fresh start"
FRESH_MODE = "fresh"  # the mode of a fresh start's revision: a new run of the team begins


def start_over(
    store: Store,
    plan: Plan,
    *,
    credentials: Credentials | None = None,
    by: str = "operator",
    timing: LeaseTiming | None = None,
) -> int:
    """Start ``plan`` over in every team of its tree; returns how many tasks were cleared.
    Refused (``ConfigError``) while a leader holds one of those teams' lease."""
    cleared = 0
    for each in team_tree(plan):
        signer = credentials
        if credentials is not None and each is not plan:
            signer = credentials.for_team(each.team, "lead")
        cleared += _one(store, each, signer, by, timing or LeaseTiming())
    return cleared


def _one(
    store: Store, plan: Plan, credentials: Credentials | None, by: str, timing: LeaseTiming
) -> int:
    team = plan.team
    records = store.tasks(team)
    attempts = interrupted_fresh(store, team)
    if not records and attempts is None and last_number(store, team) == 0:
        return 0  # nothing ran here yet: nothing to start over
    keeper = None
    if store.current_epoch(team) > 0:  # a led team: under its lease
        keeper = LeaseKeeper(store, team, f"{by}-{new_id()[-6:].lower()}", timing)
        try:
            keeper.claim(at_least=store.current_epoch(team))
        except Conflict:
            lease = store.current_lease(team)
            holder = lease.holder if lease else "another leader"
            raise ConfigError(
                f"team {team!r} is led by {holder}: stop its leader before starting over"
            ) from None
    renewer = keeper.keep_renewed() if keeper is not None else None
    try:
        epoch = keeper.check if keeper is not None else _queue_epoch
        return _restart(store, plan, credentials, by, epoch, attempts)
    finally:
        if renewer is not None:
            renewer.stop()
        if keeper is not None:
            keeper.release()


def _queue_epoch() -> int:
    return QUEUE_EPOCH


def _restart(
    store: Store,
    plan: Plan,
    credentials: Credentials | None,
    by: str,
    epoch: Callable[[], int],
    attempts: dict[str, int] | None,
) -> int:
    team = plan.team
    number = last_number(store, team) + 1
    if attempts is None:
        tasks = [read_task(r) for r in store.tasks(team)]
        attempts = {t.task_id: t.attempt for t in tasks}
        ended = ended_run(tasks)
        write_fresh(store, team, number, attempts, epoch=epoch(), holder=by, ended=ended)
    cleared = store.clear_tasks(team, epoch=epoch())
    register = Register(store, team, epoch, credentials)
    for task in plan.tasks:
        created = register.create(task.id, spec_for(plan, task))
        went = attempts.get(task.id, 0)
        if went:  # attempt numbers go on (keys stay unique), with a fresh allowance
            data = created.data.with_(attempt_base=went)
            register.move(created, "queued", attempt=went, data=data)
    entry = Revision(
        revision=number,
        digest=plan_digest(plan),
        reason=FRESH,
        by=by,
        applied_by=by,
        at=store.now(),
        mode=FRESH_MODE,
        added=[t.id for t in plan.tasks],
        notes=[f"{counted(cleared, 'task')} cleared; attempt numbers go on"],
    )
    store.append_event(team, PLAN_UPDATE, update_event(entry, plan), epoch=epoch())
    record_revision(store, team, entry, epoch=epoch())
    return cleared


def ended_run(tasks: list[Task]) -> dict[str, Any]:
    """How the run a fresh start ends stood: when its register last changed, its task
    counts, whether it had settled, and its spend (``tenure runs`` shows it)."""
    return {
        "at": max((t.updated_at for t in tasks), default=None),
        "counts": dict(sorted(Counter(t.state for t in tasks).items())),
        "settled": plan_settled(tasks),
        "spend": asdict(team_totals(tasks)),
    }
