"""An LLM planner for the leader: a goal and the artifacts the team can reach -> a plan.

The plan is validated before anything is dispatched:

1. it is a plan (Tenure's plan format, every field checked) and a DAG;
2. tasks that may run at the same time (neither depends on the other) write
   disjoint scopes;
3. every task is grounded: its input names at least one listed artifact, or it
   depends on a task; a task that names a file or URL **not** in the list is
   rejected. This is the guard against hallucination fan-out: a planner that
   invents ``vendors/zeta.txt`` would otherwise send a worker to price a vendor
   that does not exist, and every task downstream would build on it.

A plan is model output, data and not instructions: it may not add what would run
or touch the filesystem (command checks, executors, nested teams, paths outside the
working directory) unless the operator allows it (``allow``), and every use of an
allowance is logged (``roles.planning.limits``).

A rejected plan goes back to the model with the reason, up to ``max_rounds``
times. When a task exhausts its attempts, :class:`Splitter` asks the same
planner, once, for smaller tasks that together do its goal (validated the same
way, and confined to the task's own scope) before it escalates to a person.

This module holds the conversation with the model; the artifacts are in
``plan_artifacts`` and the rules in ``plan_checks``. Their public names are
re-exported here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenure.models import ChatMessage, Completion, Model, ModelError, traced
from tenure.models.meter import Mark, Meter
from tenure.protocol import Plan, PlanTask, Spend, TenureError
from tenure.protocol.errors import ConfigError
from tenure.protocol.limits import check_text
from tenure.roles.planning.artifacts import MAX_LISTED, Artifact, ArtifactKind, artifacts_from
from tenure.roles.planning.checks import (
    NOT_REFERENCES,
    PlanRejected,
    check_grounding,
    check_plan,
    check_scopes,
    looks_like_reference,
    prefixed_parts,
    references,
    tasks_of,
    validate_plan,
)
from tenure.roles.planning.limits import Allowed, NotAllowed, allowance, check_model_output

__all__ = [
    "MAX_LISTED",
    "NOT_REFERENCES",
    "PLANNER_SYSTEM",
    "Artifact",
    "ArtifactKind",
    "EventSink",
    "PlanRejected",
    "Planner",
    "PlanningFailed",
    "artifacts_from",
    "check_grounding",
    "check_plan",
    "check_scopes",
    "looks_like_reference",
    "plan_schema",
    "planner_system",
    "references",
]

def planner_system(allow: Collection[str] = frozenset()) -> str:
    """The planner's system prompt; it offers command checks and executors only when the
    operator allows them."""
    kinds = (
        '{"kind": "evidence", "max_age_seconds": N}, {"kind": "schema", "schema": JSON_SCHEMA}'
    )
    if "commands" in allow:
        kinds += ', {"kind": "command", "run": "SHELL", "expect_exit": 0}'
    executor = (
        '- "executor": optional, what runs the task (e.g. "llm:PROVIDER:MODEL")\n'
        if "executors" in allow
        else ""
    )
    never = [
        *([] if "commands" in allow else ["command checks"]),
        *([] if "executors" in allow else ["executors", "judge models"]),
        "nested teams",
        "options",
    ]
    return f"""\
You are the planner of a Tenure team. Turn the goal into a plan of small tasks that \
workers can do independently. A worker is a language model that reads only what its \
task's input names (listed files are read for it) and the results of the tasks it depends on.

Return one JSON object: {{"tasks": [TASK, ...]}}. Each TASK has:
- "id": short, letters/digits/-/_ only, unique
- "goal": what to do, in a sentence or two
- "acceptance_criteria": sentences that say what done means
- "checks": machine-run checks, any of {kinds}
- "input": an object; name every artifact the task reads by its exact name from the list
- "scope": the paths the task writes (empty if it writes nothing)
- "depends_on": ids of tasks that must finish first
- "output_schema": optional JSON Schema of the task's result
- "capability": optional, a capability a worker must have
{executor}
Rules, each one checked before anything runs:
1. Every task names at least one listed artifact in its input, or depends on another task.
2. Never name a file or URL that is not in the artifact list.
3. No dependency cycles.
4. Tasks that can run at the same time must not share any scope path.
5. To write a file, put its path in input.output_file and in scope; the worker's result is \
written there as JSON.
6. Every path is relative and stays inside the working directory: no leading /, no ~, no ..
7. Your plan is data, not instructions: it may not add {", ".join(never)}."""


PLANNER_SYSTEM = planner_system()


class PlanningFailed(TenureError):
    """The planner gave no valid plan within its rounds (or its budget).

    ``spend`` is what the failed planning cost (its model calls), for the caller to
    charge: a split that fails is paid for like one that works."""

    def __init__(self, message: str, *, spend: Spend | None = None) -> None:
        super().__init__(message)
        self.spend = spend


def plan_schema() -> dict[str, Any]:
    """The structured-output schema of a plan answer (kept loose; validation is ours)."""
    strings = {"type": "array", "items": {"type": "string"}}
    task = {
        "type": "object",
        "required": ["id", "goal"],
        "properties": {
            "id": {"type": "string"},
            "goal": {"type": "string"},
            "acceptance_criteria": strings,
            "checks": {"type": "array", "items": {"type": "object"}},
            "input": {"type": "object"},
            "scope": strings,
            "depends_on": strings,
            "output_schema": {"type": "object"},
            "capability": {"type": ["string", "null"]},
        },
    }
    return {
        "type": "object",
        "required": ["tasks"],
        "properties": {"tasks": {"type": "array", "items": task}},
    }


EventSink = Callable[[str, dict[str, Any]], None]


def _ignore(kind: str, data: dict[str, Any]) -> None:
    return None


def _to_stderr(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


@dataclass
class Planner:
    """Asks ``model`` for a plan and re-asks, with the reason, until one is valid.

    ``allow``: what the operator lets the model's plans add (``commands``,
    ``executors``); each use is a ``planner.allowed`` event and a line to ``announce``
    (stderr unless given)."""

    model: Model
    max_rounds: int = 3
    max_tokens: int | None = 8192
    on_event: EventSink = _ignore
    meter: Meter = field(default_factory=Meter)  # every call's tokens and cost
    allow: Collection[str] = frozenset()
    announce: Callable[[str], None] = _to_stderr

    def __post_init__(self) -> None:
        self.allow = allowance(self.allow)  # a frozenset of known names, or ConfigError

    @property
    def calls(self) -> int:
        return self.meter.calls

    def plan(
        self,
        goal: str,
        artifacts: list[Artifact],
        *,
        team: str = "default",
        max_attempts: int | None = None,
        budget: dict[str, Any] | None = None,
        deadline_seconds: float | None = None,
        workdir: Path | None = None,
    ) -> Plan:
        """A validated plan for ``goal``; PlanningFailed after ``max_rounds`` rejections.
        Its paths stay inside ``workdir`` (default: the current directory)."""
        check_text(goal, "goal")  # refused before any model call, not after each
        if not artifacts:
            raise ConfigError(
                "the planner needs at least one artifact the team can reach: pass --artifact "
                "PATH_OR_URL (repeatable)"
            )
        start = self.meter.mark()
        prompt = f"Goal: {goal}\n\nArtifacts the team can reach:\n"
        prompt += "\n".join(a.line() for a in artifacts)
        prompt += "\n\nReturn the plan as one JSON object."
        used: list[Allowed] = []

        def build(tasks: list[dict[str, Any]]) -> Plan:
            extra: dict[str, Any] = {}
            if max_attempts is not None:
                extra["max_attempts"] = max_attempts
            if budget:
                extra["budget"] = budget
            if deadline_seconds is not None:
                tasks = [{"deadline_seconds": deadline_seconds, **t} for t in tasks]
            plan = validate_plan({"team": team, "goal": goal, "tasks": tasks, **extra})
            used[:] = check_model_output(plan.tasks, allow=self.allow, workdir=workdir)
            check_plan(plan, artifacts)
            return plan

        try:
            plan: Plan = self._converse(prompt, build, purpose="plan")
        except PlanningFailed as exc:
            exc.spend = self._spend_since(start)
            raise
        self._allowed(used, "plan")
        spent = self._spend_since(start)
        return plan.model_copy(update={"planning_spend": spent})

    def _converse(
        self, prompt: str, build: Callable[[list[dict[str, Any]]], Any], *, purpose: str
    ) -> Any:
        messages = [
            ChatMessage("system", planner_system(self.allow)),
            ChatMessage("user", prompt),
        ]
        reason = "no answer"
        for round_ in range(1, self.max_rounds + 1):
            try:
                completion = traced.complete(
                    self.model, messages, json_schema=plan_schema(), max_tokens=self.max_tokens
                )
            except ModelError as exc:
                raise PlanningFailed(f"the planner's model call failed: {exc}") from None
            self._count(completion, purpose, round_)
            refused: dict[str, Any] = {}
            try:
                return build(tasks_of(completion))
            except NotAllowed as exc:  # what a model may not write: said so in the event
                reason, refused = str(exc), {"refused": exc.what}
            except PlanRejected as exc:
                reason = str(exc)
            self.on_event(
                "planner.rejected",
                {"purpose": purpose, "round": round_, "reason": reason, **refused},
            )
            messages += [
                ChatMessage("assistant", completion.text),
                ChatMessage(
                    "user",
                    f"Your plan was rejected: {reason}\n"
                    "Return a corrected plan as one JSON object.",
                ),
            ]
        raise PlanningFailed(
            f"the planner gave no valid plan in {self.max_rounds} tries; last reason: {reason}"
        )

    def _count(self, completion: Completion, purpose: str, round_: int) -> None:
        self.meter.record(completion, f"{self.model.provider}:{self.model.name}")
        self.on_event(
            "planner.call",
            {
                "purpose": purpose,
                "round": round_,
                "model": f"{completion.provider}:{completion.model}",
                "input_tokens": completion.usage.input_tokens,
                "output_tokens": completion.usage.output_tokens,
                "cache_read_tokens": completion.usage.cache_read_tokens,
                "cache_write_tokens": completion.usage.cache_write_tokens,
                "cost_usd": round(completion.usage.cost_usd, 8),
            },
        )
        if completion.fallback:
            self.on_event(
                "model.fallback",
                {
                    "purpose": purpose,
                    "model": f"{completion.provider}:{completion.model}",
                    "reason": completion.fallback,
                },
            )

    def _allowed(self, used: list[Allowed], purpose: str) -> None:
        """Log every use of the operator's allowance: an event and a line."""
        for each in used:
            self.on_event(
                "planner.allowed",
                {
                    "purpose": purpose,
                    "allow": each.allow,
                    "task_id": each.task_id,
                    "field": each.field,
                    "value": each.value[:500],
                },
            )
            self.announce(each.line())

    def _spend_since(self, start: Mark) -> Spend:
        return self.meter.since(start) or Spend(model=f"{self.model.provider}:{self.model.name}")

    # --- splitting ---------------------------------------------------------------------

    def split(
        self,
        task: PlanTask,
        failures: list[str],
        artifacts: list[Artifact],
        *,
        taken: set[str],
        max_parts: int = 5,
        workdir: Path | None = None,
    ) -> tuple[list[PlanTask], Spend]:
        """Smaller tasks that together do ``task``'s goal, ids prefixed ``<task>.``, within its
        scope (and ``workdir``), grounded; the caller's ``taken`` ids are avoided.
        PlanningFailed if none, with what the try cost as its ``spend``."""
        start = self.meter.mark()
        shown = task.model_dump(mode="json", exclude_defaults=True)
        prompt = (
            f"This task failed every attempt:\n```json\n{json.dumps(shown, indent=2)}\n```\n"
            "Its failures, oldest first:\n"
            + "\n".join(f"- {f[:800]}" for f in failures[-5:])
            + f"\n\nSplit it into 2 to {max_parts} smaller tasks that together achieve its goal "
            "and meet its acceptance criteria. They may depend on each other, not on other "
            "tasks. Write only within its scope.\n\nArtifacts the team can reach:\n"
            + "\n".join(a.line() for a in artifacts)
            + '\n\nReturn them as one JSON object {"tasks": [...]}.'
        )
        used: list[Allowed] = []

        def build(raw: list[dict[str, Any]]) -> list[PlanTask]:
            if not 2 <= len(raw) <= max_parts:
                raise PlanRejected(f"give 2 to {max_parts} tasks, not {len(raw)}")
            parts = prefixed_parts(task, raw, taken)
            used[:] = check_model_output(parts, allow=self.allow, workdir=workdir, parent=task)
            check_scopes(parts, within=task.scope)
            check_grounding(parts, artifacts)
            return parts

        purpose = f"split:{task.id}"
        try:
            parts: list[PlanTask] = self._converse(prompt, build, purpose=purpose)
        except PlanningFailed as exc:
            exc.spend = self._spend_since(start)  # what the failed split cost is charged too
            raise
        self._allowed(used, purpose)
        return parts, self._spend_since(start)
