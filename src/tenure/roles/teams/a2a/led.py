"""An A2A task for a team a leader leads: registered, for the leader to dispatch.

A leader's register view reads every ``task.created`` event, so a task registered
while it runs is dispatched like a planned one: to a member with the capability it
asks for, through the same ladder, retries and inbox. The task is signed with the
team's lead key (a signed leader refuses an unsigned one) and written at the team's
current epoch, as the operator writes: a person's word outranks no leader, and a
leader that moves on refuses nothing written before it.

Only while a leader runs: with the lease vacant nobody would dispatch the task, so the
request is refused in words rather than left waiting for a leader that may not come.
"""

from __future__ import annotations

from tenure.coord import Credentials
from tenure.protocol import Plan
from tenure.protocol.errors import ConfigError
from tenure.protocol.taskspec import spec_for
from tenure.roles.register import Register
from tenure.store import Store

__all__ = ["led", "register_for_leader"]


def led(store: Store, team: str) -> bool:
    """Whether a leader has ever led ``team`` (its epoch has moved): then tasks are the
    leader's to dispatch, not the shared queue's."""
    return store.current_epoch(team) > 0


def register_for_leader(store: Store, plan: Plan, *, credentials: Credentials | None) -> None:
    """Register ``plan``'s tasks into its team for the leader that runs it now."""
    team = plan.team
    if store.current_lease(team) is None:
        raise ConfigError(
            f"team {team!r} is led by a leader and none runs now (its lease is vacant); "
            "start one that stays for new work: tenure leader --keep-running"
        )
    register = Register(store, team, lambda: store.current_epoch(team), credentials)
    register.create_all([(task.id, spec_for(plan, task)) for task in plan.tasks])
