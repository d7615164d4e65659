"""Split once before the inbox: a coding task that failed every attempt becomes parts.

``CodingConfig.splitter`` is any ``split(task, failures) -> parts``;
:class:`PlannerSplit` asks the LLM planner (``tenure code --split-with MODEL``).
The leader's split feature registers the parts and keeps the task waiting for
them: every part keeps within the task's scope and has a command check of its
own; the last part in merge order depends on all the others and also carries the
task's own checks, so the task's acceptance is still run — on the parts' work
together, and once more on the integration branch when the task completes. Tasks
that depended on the task wait for it. A part is never split again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tenure.protocol import CommandCheck, Plan, PlanTask, PriorAttempt, Spend
from tenure.protocol.clip import first_line
from tenure.protocol.errors import ProtocolError
from tenure.roles.coding.scope import in_scope, merge_order
from tenure.roles.planning import Artifact, Planner, PlanningFailed

Split = Callable[[PlanTask, list[str]], list[PlanTask]]


@dataclass
class PlannerSplit:
    """The LLM planner as a splitter; the task's scope entries are its artifacts."""

    planner: Planner
    root: Path
    max_parts: int = 5

    def __call__(self, task: PlanTask, failures: list[str]) -> list[PlanTask]:
        return self.with_spend(task, failures)[0]

    def with_spend(self, task: PlanTask, failures: list[str]) -> tuple[list[PlanTask], Spend]:
        """The parts and what the planner's calls cost (a ``PlanningFailed`` carries it)."""
        artifacts = [Artifact(s, "dir" if (self.root / s).is_dir() else "file") for s in task.scope]
        return self.planner.split(
            task, failures, artifacts, taken=set(), max_parts=self.max_parts, workdir=self.root
        )


@dataclass
class CodingSplits:
    """A coding run's splitter as the leader's split feature uses it: the parts are
    checked (at least two, in the task's scope, each with a command check of its own)
    and the last in merge order depends on the others and carries the task's own
    command checks, so its acceptance is still run, on the parts' work together."""

    split: Split

    def parts_for(
        self,
        task: PlanTask,
        history: list[PriorAttempt],
        *,
        taken: set[str],
        log: Callable[[str, dict[str, object]], None],
    ) -> tuple[list[PlanTask], Spend | None]:
        failures = [f"attempt {h.attempt}: {first_line(h.failure)}" for h in history]
        if isinstance(self.split, PlannerSplit):
            parts, spend = self.split.with_spend(task, failures)
        else:
            parts, spend = self.split(task, failures), None
        try:
            return stand_in_parts(task, parts, taken), spend
        except ProtocolError as exc:  # parts that do not fit were paid for all the same
            raise PlanningFailed(str(exc), spend=spend) from None


def stand_in_parts(parent: PlanTask, parts: list[PlanTask], taken: set[str]) -> list[PlanTask]:
    """``parts`` made fit to replace ``parent``; ProtocolError naming what does not fit."""
    if len(parts) < 2:
        raise ProtocolError("split", f"at least 2 parts for {parent.id!r}, got {len(parts)}")
    for part in parts:
        if part.id in taken:
            raise ProtocolError("split", f"part id {part.id!r} is already a task of the run")
        outside = [s for s in part.scope if parent.scope and not in_scope(s, parent.scope)]
        if outside:
            raise ProtocolError(
                "split", f"part {part.id!r} writes {outside[0]!r}, outside {parent.id}'s scope"
            )
        if not any(isinstance(c, CommandCheck) for c in part.checks):
            raise ProtocolError("split", f"part {part.id!r} has no command check of its own")
    order = merge_order(Plan(team="split", tasks=parts))
    last = order[-1]
    own = [c for c in parent.checks if isinstance(c, CommandCheck)]
    fixed: list[PlanTask] = []
    for part in parts:
        update: dict[str, object] = {"depends_on": [*parent.depends_on, *part.depends_on]}
        if not part.scope:
            update["scope"] = list(parent.scope)
        if part.id == last:
            update["depends_on"] = list(dict.fromkeys([*update["depends_on"], *order[:-1]]))  # type: ignore[misc]
            update["checks"] = [*part.checks, *own]
        fixed.append(part.model_copy(update=update))
    return fixed
