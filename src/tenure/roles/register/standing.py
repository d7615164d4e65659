"""Where a plan stands in a store before it is run: new, to resume, finished already, or
different from the plan its team runs (which only ``tenure replan`` may change)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tenure.protocol import Plan
from tenure.protocol.taskspec import spec_for
from tenure.roles.register.plan import OPEN_STATES, WAITING_STATES
from tenure.roles.register.revision import interrupted_fresh, latest_revision, plan_digest
from tenure.roles.register.task import read_task
from tenure.store import Store

__all__ = ["Standing", "plan_standing"]

Kind = Literal["new", "resume", "done", "changed", "interrupted"]


@dataclass(frozen=True)
class Standing:
    kind: Kind
    team: str
    done: int = 0  # tasks done (kind "done")
    seconds_ago: float = 0.0  # since the last task finished (kind "done")
    revision: int = 0  # the store's revision of the team's plan (0: none recorded)

    def describe(self) -> str:
        """One line for a person."""
        if self.kind == "done":
            tasks = "1 task" if self.done == 1 else f"{self.done} tasks"
            return (
                f"{tasks} already done {_ago(self.seconds_ago)}; nothing to do; "
                "--fresh to start over"
            )
        if self.kind == "changed":
            where = f" (revision {self.revision})" if self.revision else ""
            return (
                f"team {self.team!r} already runs a different plan{where}: change it with "
                f"`tenure replan PLAN --team {self.team}`, or start over with --fresh"
            )
        if self.kind == "interrupted":
            return (
                f"a fresh start of team {self.team!r} was interrupted before it registered "
                "its tasks: run again with --fresh to finish it"
            )
        return "resuming" if self.kind == "resume" else "new"


def plan_standing(store: Store, plan: Plan) -> Standing:
    """Compare ``plan`` with what the store holds for its team."""
    team = plan.team
    if interrupted_fresh(store, team) is not None:
        return Standing("interrupted", team)
    records = store.tasks(team)
    latest = latest_revision(store, team)
    number = latest.revision if latest is not None else 0
    if latest is None and not records:
        return Standing("new", team)
    if latest is not None:
        same = latest.digest == plan_digest(plan)
    else:  # a register from before revisions were recorded: compare the tasks themselves
        specs = {r.task_id: read_task(r).spec for r in records}
        same = all(
            t.id in specs and specs[t.id].plan_task() == spec_for(plan, t).plan_task()
            for t in plan.tasks
        )
    if not same:
        return Standing("changed", team, revision=number)
    if any(r.state in OPEN_STATES or r.state in WAITING_STATES for r in records):
        return Standing("resume", team, revision=number)
    if {r.task_id for r in records} < {t.id for t in plan.tasks}:
        return Standing("resume", team, revision=number)  # some not registered yet
    done = [r for r in records if r.state == "done"]
    last = max((r.updated_at for r in records), default=store.now())
    return Standing("done", team, len(done), max(0.0, store.now() - last), number)


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"
