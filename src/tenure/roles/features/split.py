"""Split once before the inbox: a task that exhausted its attempts becomes smaller tasks.

When a task has used all its attempts, ``SplitHook`` asks the planner (once per
task, never for a task that is itself a split part) for 2-5 smaller tasks that
together do its goal, validated like any plan: a DAG, disjoint scopes confined
to the parent's scope, every part grounded in a listed artifact, and nothing a model
may not write (``roles.planning.limits``: a part keeps its parent's executor and
checks, and adds commands or executors only if the operator allows). The parts are
registered as ``<task>.<part>``; the parent stays queued with ``data.split_into``
and is never dispatched again. When every part is done the parent is completed
with their artifacts (its own command checks run first); when a part needs a
person, so does the parent. If the planner cannot split it, the task goes to the
inbox as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Protocol

from tenure.executors.paths import URL_PREFIXES, PathOutside, inside
from tenure.protocol import (
    CommandCheck,
    PlanTask,
    PriorAttempt,
    Spend,
    TaskResult,
    TenureError,
    idempotency_key,
    to_dict,
)
from tenure.protocol.clip import clip
from tenure.protocol.taskspec import AttemptData
from tenure.protocol.words import counted
from tenure.roles.leader import GO, HOLD, Admission, LeaderContext, LeaderHook
from tenure.roles.planning import Artifact, Planner, PlanningFailed, references
from tenure.roles.register import Task
from tenure.roles.register.spend import log_extra
from tenure.verify import verify

__all__ = ["STUCK", "EventSink", "SplitHook", "Splits", "Splitter"]

STUCK = ("blocked", "failed", "cancelled")
EventSink = Callable[[str, dict[str, object]], None]


class Splits(Protocol):
    """Anything that can split a task out of attempts into parts (ids ``<task>.<part>``).

    Raises a ``TenureError`` saying why it cannot (a ``PlanningFailed`` carries what
    the failed try cost as its ``spend``, charged to the task all the same);
    ``Spend`` is what finding the parts cost (a planner's model calls), or None."""

    def parts_for(
        self, task: PlanTask, history: list[PriorAttempt], *, taken: set[str], log: EventSink
    ) -> tuple[list[PlanTask], Spend | None]: ...


@dataclass
class Splitter:
    """Splits with the LLM planner, grounded in the team's artifacts."""

    planner: Planner
    artifacts: list[Artifact] = field(default_factory=list)
    workdir: Path | None = None
    max_parts: int = 5

    def parts_for(
        self, task: PlanTask, history: list[PriorAttempt], *, taken: set[str], log: EventSink
    ) -> tuple[list[PlanTask], Spend | None]:
        failures = [h.failure for h in history]
        planner = replace(self.planner, on_event=log)  # its calls go into the team's log
        return planner.split(
            task,
            failures,
            self.artifacts_for(task),
            taken=taken,
            max_parts=self.max_parts,
            workdir=self.workdir,
        )

    def artifacts_for(self, task: PlanTask) -> list[Artifact]:
        """The team's artifacts, or else what the task itself was given (a path leading
        out of the working directory is not something the team can reach)."""
        if self.artifacts:
            return self.artifacts
        out = []
        for ref in references(task):
            if ref.startswith(URL_PREFIXES):
                out.append(Artifact(ref, "url"))
                continue
            try:
                path = inside(ref, self.workdir, field="input")
            except PathOutside:
                continue
            if path.is_dir():
                out.append(Artifact(ref, "dir"))
            elif path.is_file():
                out.append(Artifact(ref, "file"))
        return out


class SplitHook(LeaderHook):
    """Splits a task out of attempts once, and settles split parents."""

    name: ClassVar[str] = "split"
    stageable: ClassVar[bool] = True  # dispatch and result points: the store only

    def __init__(self, splitter: Splits | None = None) -> None:
        self.splitter = splitter

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        return HOLD if task.data.split_into else GO  # it waits for its parts instead

    def on_exhausted(
        self, ctx: LeaderContext, task: Task, failure: str, data: AttemptData
    ) -> bool:
        if self.splitter is None or task.spec.split_of or task.data.split_into:
            return False  # split once: parts and parents are never split again
        return self._split(ctx, self.splitter, task, failure, data)

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        """Complete a split parent whose parts are all done; block one whose part is stuck."""
        if not any(t.data.split_into for t in tasks):
            return False
        by_id = {t.task_id: t for t in tasks}
        acted = False
        for parent in tasks:
            ids = parent.data.split_into
            if parent.state != "queued" or not ids:
                continue
            parts = [by_id[i] for i in ids if i in by_id]
            stuck = [p for p in parts if p.state in STUCK]
            if stuck:
                first = stuck[0]
                ctx.block(parent, f"split task {first.task_id} is {first.state}: {first.reason}")
                acted = True
            elif len(parts) == len(ids) and all(p.is_done for p in parts):
                _complete(ctx, parent, parts)
                acted = True
        return acted

    def _split(
        self, ctx: LeaderContext, splitter: Splits, task: Task, failure: str, data: AttemptData
    ) -> bool:
        history = data.history or [PriorAttempt(attempt=max(task.attempt, 1), status="failed", failure=failure)]
        taken = {t.task_id for t in ctx.tasks()}
        try:
            parts, spend = splitter.parts_for(
                task.spec.plan_task(), history, taken=taken, log=ctx.event
            )
        except TenureError as exc:
            spent = exc.spend if isinstance(exc, PlanningFailed) else None
            if spent is not None and spent.calls:  # the planner's calls are paid for anyway
                data = log_extra(data, "split", spent, task.attempt)
            ctx.event("task.split_failed", {"task_id": task.task_id, "reason": clip(str(exc), 500)})
            used = counted(task.used_attempts, "attempt")
            why = f"gave up after {used}: {failure}; could not split: {exc}"
            ctx.block(task, why, data=data)
            return True
        specs = [
            (
                part.id,
                task.spec.model_copy(
                    update={
                        **{name: getattr(part, name) for name in type(part).model_fields},
                        "max_attempts": part.max_attempts or task.spec.max_attempts,
                        "split_of": task.task_id,
                        "replica_of": None,
                        "round": None,
                        "voter": None,
                    }
                ),
            )
            for part in parts
        ]
        ctx.register.create_all(specs)  # all parts or none; an earlier try's stay as they are
        ids = [part.id for part in parts]
        if spend is not None:
            data = log_extra(data, "split", spend, task.attempt)
        data = data.with_(split_into=ids)
        reason = f"split into {', '.join(ids)} after {counted(task.used_attempts, 'attempt')}"
        ctx.register.move(task, "queued", assignee=None, data=data, reason=reason)
        ctx.event("task.split", {"task_id": task.task_id, "into": ids})
        return True


def _complete(ctx: LeaderContext, parent: Task, parts: list[Task]) -> None:
    changed = [c for p in parts for c in ((p.result or {}).get("notes") or {}).get("changed", [])]
    result = TaskResult.model_validate(
        {
            "task_id": parent.task_id,
            "idempotency_key": idempotency_key(parent.task_id, max(parent.attempt, 1)),
            "epoch": ctx.epoch(),
            "status": "completed",
            "artifact": {p.task_id: (p.result or {}).get("artifact") for p in parts},
            "notes": {"changed": changed, "verified": [f"{p.task_id} accepted" for p in parts]},
        }
    )
    running = ctx.register.move(parent, "running")
    record = ctx.register.move(running, "review", result=to_dict(result))
    commands = [c for c in parent.spec.checks if isinstance(c, CommandCheck)]
    verdicts = verify(list(commands), result, workdir=ctx.workdir) if commands else []
    failing = [v for v in verdicts if not v.passed]
    if failing:
        ctx.block(
            record, f"after its split tasks, {failing[0].check} check failed: {failing[0].reason}"
        )
        return
    ctx.finish(record, f"done by its split tasks: {', '.join(p.task_id for p in parts)}")
