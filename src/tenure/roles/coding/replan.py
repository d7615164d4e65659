"""Goal shift for a coding run: freeze dispatch, re-derive the unstarted tasks, log it.

A replan request is a file in the run's scratch space
(``.tenure/attempts/RUN/replan.json``): a running leader sees it on its next tick,
stops dispatching, lets running attempts finish (or cancels them, with the reason),
then applies it and removes the file. Without a live leader ``tenure replan``
applies it to the files in git directly, and the next ``tenure code --run RUN``
continues with the new plan.

Re-deriving: a merged task keeps its definition, and so does a running or accepted one
the new plan leaves as it was; every other task takes its definition from the new
plan; a task of the old plan that the new one leaves out and that is not merged is
``dropped``. While a request waits, nothing it drops or changes is merged. Attempt counters never go back (branch names stay unique); a
re-derived task gets a fresh allowance of attempts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tenure.protocol import Plan, PlanTask
from tenure.protocol.private import private_dir
from tenure.protocol.taskspec import spec_for
from tenure.roles.coding.files import (
    ACCEPTED,
    CANCELLED,
    DROPPED,
    MERGED,
    PENDING,
    RUNNING,
    StatusRow,
)
from tenure.roles.coding.lease import holder_id
from tenure.roles.coding.rows import rows_of
from tenure.roles.coding.run import RunPlace
from tenure.roles.coding.scope import check_tasks
from tenure.roles.leader.replan import PLAN_UPDATE, update_event
from tenure.roles.register import Task
from tenure.roles.register.revision import Revision, last_number, plan_digest, record_revision
from tenure.store import TERMINAL_STATES

REQUEST_FILE = "replan.json"
_NONE = StatusRow(id="", state="")
PID_FILE = "leader.pid"


@dataclass(frozen=True)
class ReplanRequest:
    plan: Plan
    cancel_running: bool
    reason: str

    def write(self, attempts_dir: Path) -> Path:
        private_dir(attempts_dir)
        path = attempts_dir / REQUEST_FILE
        tmp = path.with_suffix(".tmp")
        data = {
            "plan": self.plan.model_dump(mode="json"),
            "cancel_running": self.cancel_running,
            "reason": self.reason,
        }
        tmp.write_text(json.dumps(data))
        tmp.replace(path)  # a leader never reads half a request
        return path

    @classmethod
    def read(cls, attempts_dir: Path) -> ReplanRequest | None:
        path = attempts_dir / REQUEST_FILE
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(Plan.model_validate(data["plan"]), bool(data["cancel_running"]), data["reason"])


def live_leader(attempts_dir: Path) -> int | None:
    """The pid of a leader process running this run, if one is alive."""
    path = attempts_dir / PID_FILE
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def held_back(old: Plan, new: Plan) -> set[str]:
    """The tasks of ``old`` that ``new`` drops or changes: their accepted work is not
    merged (the replan drops them, or re-derives them from ``new``)."""
    wanted = {t.id: t for t in new.tasks}
    return {t.id for t in old.tasks if wanted.get(t.id) != t}


def apply_replan(place: RunPlace, request: ReplanRequest) -> list[str]:
    """Re-derive the run from ``request.plan`` in the register and the files; one note
    per change. The register's spec of a re-derived task is replaced (fenced)."""
    check_tasks(place.root, request.plan)
    old, new = place.plan, request.plan
    tasks = {t.task_id: t for t in place.register.tasks()}
    rows = rows_of(place.run_id, list(tasks.values()))
    new_ids = {t.id for t in new.tasks}
    # accepted work the new plan drops or changes is not merged (held back while the
    # replan waited): dropped, or re-derived; only merged work keeps its definition
    held = held_back(old, new)
    locked = {
        k for k, r in rows.items() if r.state in (RUNNING, ACCEPTED, MERGED) and k not in held
    }
    kept = [t for t in old.tasks if rows.get(t.id, _NONE).state == MERGED and t.id not in new_ids]
    notes = [f"{t.id}: kept ({rows[t.id].state}), not in the new plan" for t in kept]
    merged: list[PlanTask] = [*kept]
    for task in new.tasks:
        merged.append(_rederive(place, task, old, tasks, rows, locked, request, notes))
    plan = Plan.model_validate(
        {**new.model_dump(exclude={"tasks"}), "tasks": [t.model_dump(by_alias=True) for t in merged]}
    )
    for task in old.tasks:
        record = tasks.get(task.id)
        if task.id in new_ids or task.id in locked or record is None:
            continue
        if record.state not in TERMINAL_STATES:
            leader_cancelled = record.data.coding_state == CANCELLED
            state = CANCELLED if leader_cancelled else DROPPED
            reason = record.reason if leader_cancelled else "not in the new plan"
            place.register.move(record, "cancelled", reason=reason, data=record.data.with_(coding_state=state))
            if not leader_cancelled:
                notes.append(f"{task.id}: dropped")
    place.plan = plan
    mode = "cancel running" if request.cancel_running else "let running finish"
    place.folder.replace_plan(plan, f"replan ({mode}): {request.reason}", notes)
    place.commit(f"tenure: replan: {request.reason}"[:200])
    place.event("replanned", reason=request.reason, mode=mode, changes=notes)
    _log_revision(place, request, old, plan, notes, mode)
    return notes


def _log_revision(
    place: RunPlace, request: ReplanRequest, old: Plan, plan: Plan, notes: list[str], mode: str
) -> None:
    """The same changelog entry and ``plan.update`` event as every team's replan."""
    before, after = {t.id: t for t in old.tasks}, {t.id: t for t in plan.tasks}
    wanted = {t.id for t in request.plan.tasks}
    number = last_number(place.store, place.team) + 1
    entry = Revision(
        revision=number,
        digest=plan_digest(request.plan),
        reason=request.reason,
        by=holder_id(),
        at=place.store.now(),
        mode=mode,
        added=[k for k in after if k not in before],
        dropped=[k for k in before if k not in wanted],
        changed=[k for k in after if k in before and before[k] != after[k]],
        notes=notes,
    )
    epoch = place.fence()
    place.store.append_event(place.team, PLAN_UPDATE, update_event(entry, plan), epoch=epoch)
    record_revision(place.store, place.team, entry, epoch=epoch)


def _rederive(
    place: RunPlace,
    task: PlanTask,
    old: Plan,
    tasks: dict[str, Task],
    rows: dict[str, StatusRow],
    locked: set[str],
    request: ReplanRequest,
    notes: list[str],
) -> PlanTask:
    """The definition the run goes on with for one task of the new plan."""
    record, row = tasks.get(task.id), rows.get(task.id)
    before = next((t for t in old.tasks if t.id == task.id), None)
    if record is None or row is None:
        place.register.create(task.id, spec_for(request.plan, task))
        notes.append(f"{task.id}: added")
        return task
    changed = before is None or before != task
    if task.id in locked and before is not None:
        if changed:
            notes.append(f"{task.id}: already {row.state}; its new definition is not applied")
        return before
    if record.state in TERMINAL_STATES:
        notes.append(f"{task.id}: {row.state}, and a {record.state} task cannot come back")
        return before or task
    if row.state != PENDING or row.attempt:
        notes.append(f"{task.id}: re-derived from {row.state}" + (" (changed)" if changed else ""))
    elif changed:
        notes.append(f"{task.id}: changed")
    if changed and place.folder.task_file(task.id).exists():
        place.folder.append_replanned(task, request.reason)
    data = record.data.with_(attempt_base=record.attempt, coding_state=None, question=None)
    place.register.move(
        record, "queued", spec=spec_for(request.plan, task), data=data, reason="", assignee=None
    )
    return task
