"""What a run came to, read from the register: one value a program can branch on.

A leader "finishes" when nothing can move without a person, which is not the same
as the work being done: a task out of attempts waits in the inbox. So the outcome
is read from the tasks' states, never from the leader's exit: ``done`` only when
every task is done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tenure.roles.register import OPEN_STATES, Task
from tenure.roles.register.spend import Totals, task_totals, team_totals
from tenure.roles.teams.reading import tasks as read_tasks
from tenure.store import Store, TaskState

__all__ = ["RunOutcome", "RunResult", "TaskOutcome", "read_result"]

RunOutcome = Literal["done", "blocked", "failed", "stopped"]


@dataclass(frozen=True)
class TaskOutcome:
    """Where one task ended: its state, how many attempts it took, its accepted
    artifact (``done`` only), why it is where it is, and what it asks a person."""

    state: TaskState
    attempts: int
    artifact: Any = None
    reason: str = ""
    question: str | None = None
    spend: Totals = field(default_factory=Totals)  # model tokens, cost, calls, wall time


@dataclass(frozen=True)
class RunResult:
    """A run of a team, as its register holds it when the run returned.

    ``outcome``: ``done`` (every task done); ``failed`` (a task was stopped for
    good, e.g. over budget); ``blocked`` (a task waits for a person: a question,
    a refusal, attempts used up); ``stopped`` (the run ended first — a timeout —
    or tasks were cancelled). ``failed`` and ``blocked`` tasks are in the inbox:
    answer them and run again. ``tasks`` holds the plan's tasks (quorum voters and
    split parts are in ``tenure.tasks``).
    """

    team: str
    outcome: RunOutcome
    tasks: Mapping[str, TaskOutcome]
    seconds: float = 0.0
    spend: Totals = field(default_factory=Totals)  # the whole team's: planning, judges too

    @property
    def ok(self) -> bool:
        """Every task is done."""
        return self.outcome == "done"

    @property
    def done(self) -> int:
        return self._count("done")

    @property
    def blocked(self) -> int:
        return self._count("blocked")

    @property
    def failed(self) -> int:
        return self._count("failed")

    @property
    def cancelled(self) -> int:
        return self._count("cancelled")

    @property
    def open(self) -> int:
        """Tasks still queued, running or in review (a run stopped before they settled)."""
        return sum(t.state in OPEN_STATES for t in self.tasks.values())

    def _count(self, state: str) -> int:
        return sum(t.state == state for t in self.tasks.values())

    def __str__(self) -> str:
        counts = ", ".join(
            f"{n} {name}"
            for name in ("done", "blocked", "failed", "cancelled", "open")
            if (n := getattr(self, name))
        )
        return f"{self.team}: {self.outcome} ({counts or 'no tasks'}) in {self.seconds:.1f}s"


def read_result(store: Store, team: str, *, seconds: float = 0.0) -> RunResult:
    """The result of ``team``'s run as its register holds it now."""
    everything = read_tasks(store, team)
    own = [t for t in everything if t.spec.replica_of is None and t.spec.split_of is None]
    outcomes = {t.task_id: _outcome(t) for t in own}
    return RunResult(
        team=team,
        outcome=_overall([t.state for t in own]),
        tasks=outcomes,
        seconds=seconds,
        spend=team_totals(everything),
    )


def _outcome(task: Task) -> TaskOutcome:
    artifact = (task.result or {}).get("artifact") if task.state == "done" else None
    return TaskOutcome(
        state=task.state,
        attempts=task.attempt,
        artifact=artifact,
        reason=task.reason,
        question=task.data.question,
        spend=task_totals(task),
    )


def _overall(states: list[TaskState]) -> RunOutcome:
    if "failed" in states:
        return "failed"
    if "blocked" in states:
        return "blocked"
    if states and all(s == "done" for s in states):
        return "done"
    return "stopped"
