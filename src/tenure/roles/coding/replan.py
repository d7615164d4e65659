"""Goal shift for a coding run: freeze dispatch, re-derive the unstarted tasks, log it.

A replan request is a file in the run's scratch space
(``.tenure/attempts/RUN/replan.json``): a running leader sees it on its next tick,
stops dispatching, lets running attempts finish (or cancels them, with the reason),
then applies it and removes the file. Without a live leader ``tenure replan``
applies it to the files in git directly, and the next ``tenure code --run RUN``
continues with the new plan.

Re-deriving: a task that is running, accepted or merged keeps its definition
(unless cancelled); every other task takes its definition from the new plan; a
task of the old plan that the new one leaves out and that never ran to the end is
``dropped``. Attempt counters never go back (branch names stay unique); a
re-derived task gets a fresh allowance of attempts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tenure.protocol import Plan, PlanTask
from tenure.roles.coding.files import (
    ACCEPTED,
    CANCELLED,
    DROPPED,
    MERGED,
    PENDING,
    RUNNING,
    StatusRow,
    now,
)

REQUEST_FILE = "replan.json"
PID_FILE = "leader.pid"


@dataclass(frozen=True)
class ReplanRequest:
    plan: Plan
    cancel_running: bool
    reason: str

    def write(self, attempts_dir: Path) -> Path:
        attempts_dir.mkdir(parents=True, exist_ok=True)
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


def rederive(old: Plan, new: Plan, rows: dict[str, StatusRow]) -> tuple[Plan, list[str]]:
    """The plan the run continues with, and one line per change; updates ``rows``."""
    new_ids = {t.id for t in new.tasks}
    locked = {k for k, r in rows.items() if r.state in (RUNNING, ACCEPTED, MERGED)}
    tasks: list[PlanTask] = []
    notes: list[str] = []
    old_ids = {t.id for t in old.tasks}
    for task in old.tasks:
        if task.id in locked and task.id not in new_ids:
            tasks.append(task)
            notes.append(f"{task.id}: kept ({rows[task.id].state}), not in the new plan")
    for task in new.tasks:
        row = rows.get(task.id)
        if task.id in locked and row is not None:
            tasks.append(old.task(task.id))
            if old.task(task.id) != task:
                notes.append(f"{task.id}: already {row.state}; its new definition is not applied")
            continue
        tasks.append(task)
        if row is None:
            rows[task.id] = StatusRow(task.id, updated_at=now())
            notes.append(f"{task.id}: added")
        else:
            changed = task.id not in old_ids or old.task(task.id) != task
            if row.state != PENDING or row.attempt:
                notes.append(
                    f"{task.id}: re-derived from {row.state}" + (" (changed)" if changed else "")
                )
            elif changed:
                notes.append(f"{task.id}: changed")
            row.state, row.reason, row.updated_at = PENDING, "", now()
            row.replanned_at_attempt = row.attempt
    for task in old.tasks:
        row = rows[task.id]
        if task.id not in new_ids and task.id not in locked and row.state != CANCELLED:
            row.state, row.reason, row.updated_at = DROPPED, "not in the new plan", now()
            notes.append(f"{task.id}: dropped")
    merged = Plan.model_validate(
        {
            **new.model_dump(exclude={"tasks"}),
            "tasks": [t.model_dump() for t in tasks],
        }
    )
    return merged, notes
