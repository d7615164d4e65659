"""Split once before the inbox: a task that exhausted its attempts becomes smaller tasks.

When a task has used all its attempts, the leader's :class:`Splitter` asks the
planner (once per task, never for a task that is itself a split part) for 2-5
smaller tasks that together do its goal, validated like any plan: a DAG,
disjoint scopes confined to the parent's scope, every part grounded in a listed
artifact. The parts are registered as ``<task>.<part>``; the parent stays
queued with ``data.split_into`` and is never dispatched again. When every part
is done the parent is completed with their artifacts (its own command checks
run first); when a part needs a person, so does the parent. If the planner
cannot split it, the task goes to the inbox as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from tenure.models import ModelError
from tenure.protocol import (
    Check,
    CommandCheck,
    ConfigError,
    PlanTask,
    TaskResult,
    idempotency_key,
    to_dict,
)
from tenure.protocol.errors import Conflict
from tenure.roles.features import budget
from tenure.roles.planning.planner import Artifact, Planner, PlanningFailed, references
from tenure.store import Store, TaskRecord
from tenure.verify import verify

if TYPE_CHECKING:
    from tenure.roles.leader.review import Reviewer

_CHECKS: TypeAdapter[list[Check]] = TypeAdapter(list[Check])
STUCK = ("blocked", "failed", "cancelled")


@dataclass
class Splitter:
    """The leader's hook: ``split(reviewer, task, failure, data)`` -> True if it split."""

    planner: Planner
    artifacts: list[Artifact] = field(default_factory=list)
    workdir: Path | None = None
    max_parts: int = 5

    def split(
        self, reviewer: Reviewer, task: TaskRecord, failure: str, data: dict[str, Any]
    ) -> bool:
        if task.spec.get("split_of") or task.data.get("split_into"):
            return False  # split once: parts and parents are never split again
        try:
            parent = PlanTask.model_validate(
                {k: v for k, v in task.spec.items() if k in PlanTask.model_fields}
            )
        except ValueError:
            return False
        failures = [str(h.get("failure", "")) for h in data.get("history", [])] or [failure]
        taken = {t.task_id for t in reviewer.store.tasks(reviewer.team)}
        sink = self.planner.on_event
        self.planner.on_event = reviewer.event
        try:
            parts, spend = self.planner.split(
                parent, failures, self._artifacts(parent), taken=taken, max_parts=self.max_parts
            )
        except (PlanningFailed, ModelError, ConfigError) as exc:
            reviewer.event("task.split_failed", {"task_id": task.task_id, "reason": str(exc)[:500]})
            return False
        finally:
            self.planner.on_event = sink
        ids = [part.id for part in parts]
        for part in parts:
            spec = to_dict(part)
            spec["max_attempts"] = part.max_attempts or int(task.spec.get("max_attempts", 3))
            spec["split_of"] = task.task_id
            for key in ("team_budget", "planning_spend"):
                if task.spec.get(key):
                    spec[key] = task.spec[key]
            try:
                reviewer.store.create_task(
                    reviewer.team, part.id, epoch=reviewer.epoch(), spec=spec
                )
            except Conflict:
                continue  # registered a moment ago by this split's earlier try
        data = budget.log_extra(data, "split", spend, task.attempt)
        used = task.attempt - int(task.data.get("attempt_base", 0))
        reviewer._move(
            task,
            "queued",
            assignee=None,
            data={**data, "split_into": ids},
            reason=f"split into {', '.join(ids)} after {used} attempts",
        )
        reviewer.event("task.split", {"task_id": task.task_id, "into": ids})
        return True

    def _artifacts(self, parent: PlanTask) -> list[Artifact]:
        """The team's artifacts, or else what the parent itself was given."""
        if self.artifacts:
            return self.artifacts
        root = self.workdir or Path(".")
        out = []
        for ref in references(parent):
            if ref.startswith(("http://", "https://")):
                out.append(Artifact(ref, "url"))
            elif (root / ref).is_dir():
                out.append(Artifact(ref, "dir"))
            elif (root / ref).is_file():
                out.append(Artifact(ref, "file"))
        return out


def settle_splits(
    store: Store, team: str, reviewer: Reviewer, tasks: list[TaskRecord] | None = None
) -> bool:
    """Complete a split parent whose parts are all done; block one whose part is stuck.
    ``tasks`` is the register as the caller just read it (read here if not given)."""
    tasks = store.tasks(team) if tasks is None else tasks
    if not any(t.data.get("split_into") for t in tasks):
        return False
    by_id = {t.task_id: t for t in tasks}
    acted = False
    for parent in tasks:
        ids = parent.data.get("split_into")
        if parent.state != "queued" or not ids:
            continue
        parts = [by_id[i] for i in ids if i in by_id]
        stuck = [p for p in parts if p.state in STUCK]
        if stuck:
            first = stuck[0]
            reviewer.block(parent, f"split task {first.task_id} is {first.state}: {first.reason}")
            acted = True
        elif len(parts) == len(ids) and all(p.state == "done" for p in parts):
            _complete(store, team, reviewer, parent, parts)
            acted = True
    return acted


def _complete(
    store: Store, team: str, reviewer: Reviewer, parent: TaskRecord, parts: list[TaskRecord]
) -> None:
    changed = [c for p in parts for c in ((p.result or {}).get("notes") or {}).get("changed", [])]
    epoch = reviewer.epoch()
    result = TaskResult.model_validate(
        {
            "task_id": parent.task_id,
            "idempotency_key": idempotency_key(parent.task_id, max(parent.attempt, 1)),
            "epoch": epoch,
            "status": "completed",
            "artifact": {p.task_id: (p.result or {}).get("artifact") for p in parts},
            "notes": {"changed": changed, "verified": [f"{p.task_id} accepted" for p in parts]},
        }
    )
    running = store.transition(
        team, parent.task_id, epoch=epoch, expect=["queued"], to="running", version=parent.version
    )
    record = store.transition(
        team,
        parent.task_id,
        epoch=reviewer.epoch(),
        expect=["running"],
        to="review",
        version=running.version,
        result=to_dict(result),
    )
    commands = [
        c
        for c in _CHECKS.validate_python(parent.spec.get("checks", []))
        if isinstance(c, CommandCheck)
    ]
    verdicts = verify(list(commands), result, workdir=reviewer.workdir) if commands else []
    failing = [v for v in verdicts if not v.passed]
    if failing:
        reviewer.block(
            record, f"after its split tasks, {failing[0].check} check failed: {failing[0].reason}"
        )
        return
    reviewer._move(
        record, "done", reason=f"done by its split tasks: {', '.join(p.task_id for p in parts)}"
    )
