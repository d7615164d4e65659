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

A rejected plan goes back to the model with the reason, up to ``max_rounds``
times. When a task exhausts its attempts, :class:`Splitter` asks the same
planner, once, for smaller tasks that together do its goal (validated the same
way, and confined to the task's own scope) before it escalates to a person.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from tenure.executors.llm import in_scope
from tenure.models import ChatMessage, Completion, Model, ModelError, Usage
from tenure.protocol import Plan, PlanTask, ProtocolError, Spend, TenureError
from tenure.protocol.codec import translate
from tenure.protocol.errors import ConfigError
from tenure.protocol.plan import check_plan_graph

ArtifactKind = Literal["file", "dir", "url", "input"]
MAX_LISTED = 200
_FILE_NAME = re.compile(r"^[\w.-]+\.[A-Za-z0-9]{1,8}$")
NOT_REFERENCES = ("output_file",)  # outputs are new files; the scope governs them

PLANNER_SYSTEM = """\
You are the planner of a Tenure team. Turn the goal into a plan of small tasks that \
workers can do independently. A worker is a language model that reads only what its \
task's input names (listed files are read for it) and the results of the tasks it depends on.

Return one JSON object: {"tasks": [TASK, ...]}. Each TASK has:
- "id": short, letters/digits/-/_ only, unique
- "goal": what to do, in a sentence or two
- "acceptance_criteria": sentences that say what done means
- "checks": machine-run checks, any of {"kind": "evidence", "max_age_seconds": N}, \
{"kind": "schema", "schema": JSON_SCHEMA}, {"kind": "command", "run": "SHELL", "expect_exit": 0}
- "input": an object; name every artifact the task reads by its exact name from the list
- "scope": the paths the task writes (empty if it writes nothing)
- "depends_on": ids of tasks that must finish first
- "output_schema": optional JSON Schema of the task's result
- "capability": optional, a capability a worker must have

Rules, each one checked before anything runs:
1. Every task names at least one listed artifact in its input, or depends on another task.
2. Never name a file or URL that is not in the artifact list.
3. No dependency cycles.
4. Tasks that can run at the same time must not share any scope path.
5. To write a file, put its path in input.output_file and in scope; the worker's result is written there as JSON."""


@dataclass(frozen=True)
class Artifact:
    """Something the team can actually reach: a file, a directory, a URL or an input."""

    name: str
    kind: ArtifactKind = "file"
    description: str = ""

    def covers(self, reference: str) -> bool:
        ref = reference.strip()
        if self.kind == "dir":
            return ref.strip("/") == self.name.strip("/") or in_scope(ref, [self.name])
        if self.kind == "url":
            return ref == self.name or ref.startswith(self.name.rstrip("/") + "/")
        return ref == self.name

    def line(self) -> str:
        about = f": {self.description}" if self.description else ""
        return f"- {self.name} ({self.kind}){about}"


def artifacts_from(values: list[str], workdir: Path | None = None) -> list[Artifact]:
    """``--artifact`` values: URLs as they are; paths must exist (relative to ``workdir``);
    a directory lists its files too. ConfigError naming the first one that is missing."""
    root = workdir or Path(".")
    out: list[Artifact] = []
    for value in values:
        if re.match(r"^https?://", value):
            out.append(Artifact(value, "url"))
            continue
        path = root / value
        if path.is_file():
            out.append(Artifact(value, "file", f"{path.stat().st_size} bytes"))
        elif path.is_dir():
            out.append(Artifact(value.rstrip("/") + "/", "dir"))
            files = sorted(p for p in path.rglob("*") if p.is_file())[:MAX_LISTED]
            for file in files:
                name = file.relative_to(root).as_posix()
                out.append(Artifact(name, "file", f"{file.stat().st_size} bytes"))
        else:
            raise ConfigError(
                f"artifact {value!r} does not exist (looked in {root.resolve()}): "
                "give files, directories or http(s) URLs the team can reach"
            )
    return out


class PlanRejected(ValueError):
    """The plan breaks a rule; the message is what the planner is told."""


class PlanningFailed(TenureError):
    """The planner gave no valid plan within its rounds (or its budget)."""


# --- validation ----------------------------------------------------------------------------


def looks_like_reference(value: str) -> bool:
    """A string that names a file, a directory or a URL (not free text)."""
    value = value.strip()
    if not value or " " in value or "\n" in value or len(value) > 500:
        return False
    return bool(re.match(r"^https?://", value)) or "/" in value or bool(_FILE_NAME.match(value))


def references(task: PlanTask) -> list[str]:
    """Every file/URL-like string in the task's input (outputs excepted)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if looks_like_reference(value):
                found.append(value.strip())
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk({k: v for k, v in task.input.items() if k not in NOT_REFERENCES})
    return found


def check_grounding(tasks: list[PlanTask], artifacts: list[Artifact]) -> None:
    for task in tasks:
        refs = references(task)
        unknown = [r for r in refs if not any(a.covers(r) for a in artifacts)]
        if unknown:
            raise PlanRejected(
                f"task {task.id!r} names {unknown[0]!r}, which is not in the artifact list; "
                "use only the listed artifacts, by their exact names"
            )
        named = {str(v).strip() for v in _values(task.input)}
        inputs = any(a.kind == "input" and a.name in named for a in artifacts)
        if not refs and not inputs and not task.depends_on:
            raise PlanRejected(
                f"task {task.id!r} is grounded in no listed artifact: name at least one in its "
                "input, or make it depend on a task that is"
            )


def _values(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for item in value.values() for v in _values(item)]
    if isinstance(value, list):
        return [v for item in value for v in _values(item)]
    return [value]


def check_scopes(tasks: list[PlanTask], *, within: list[str] | None = None) -> None:
    """Writers that may run at once have disjoint scopes (and stay ``within`` if given)."""
    ancestors = _ancestors(tasks)
    for task in tasks:
        if within is not None:
            outside = [s for s in task.scope if not in_scope(s, within)]
            if outside:
                raise PlanRejected(
                    f"task {task.id!r} writes {outside[0]!r}, outside the scope it was split "
                    f"from ({', '.join(within) or 'nothing'})"
                )
    for i, first in enumerate(tasks):
        for second in tasks[i + 1 :]:
            if first.id in ancestors[second.id] or second.id in ancestors[first.id]:
                continue  # ordered by dependency: never at the same time
            for path in first.scope:
                for other in second.scope:
                    if in_scope(path, [other]) or in_scope(other, [path]):
                        raise PlanRejected(
                            f"tasks {first.id!r} and {second.id!r} both write {path!r} and "
                            "neither depends on the other: give them disjoint scopes or order "
                            "them with depends_on"
                        )


def _ancestors(tasks: list[PlanTask]) -> dict[str, set[str]]:
    deps = {t.id: set(t.depends_on) for t in tasks}
    out: dict[str, set[str]] = {}

    def visit(task_id: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if task_id in out:
            return out[task_id]
        found: set[str] = set()
        for dep in deps.get(task_id, ()):
            if dep in seen:
                continue
            found |= {dep, *visit(dep, seen | {task_id})}
        out[task_id] = found
        return found

    for task_id in deps:
        visit(task_id)
    return out


def check_plan(plan: Plan, artifacts: list[Artifact]) -> None:
    """All three rules; PlanRejected with the first broken one."""
    check_scopes(plan.tasks)
    check_grounding(plan.tasks, artifacts)


# --- the planner ---------------------------------------------------------------------------


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


@dataclass
class Planner:
    """Asks ``model`` for a plan and re-asks, with the reason, until one is valid."""

    model: Model
    max_rounds: int = 3
    max_tokens: int | None = 8192
    on_event: EventSink = _ignore
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    unpriced: int = 0

    def plan(
        self,
        goal: str,
        artifacts: list[Artifact],
        *,
        team: str = "default",
        max_attempts: int | None = None,
        budget: dict[str, Any] | None = None,
        deadline_seconds: float | None = None,
    ) -> Plan:
        """A validated plan for ``goal``; PlanningFailed after ``max_rounds`` rejections."""
        if not artifacts:
            raise ConfigError(
                "the planner needs at least one artifact the team can reach: pass --artifact "
                "PATH_OR_URL (repeatable)"
            )
        start = self.usage, self.calls, self.unpriced
        prompt = f"Goal: {goal}\n\nArtifacts the team can reach:\n"
        prompt += "\n".join(a.line() for a in artifacts)
        prompt += "\n\nReturn the plan as one JSON object."

        def build(tasks: list[dict[str, Any]]) -> Plan:
            extra: dict[str, Any] = {}
            if max_attempts is not None:
                extra["max_attempts"] = max_attempts
            if budget:
                extra["budget"] = budget
            if deadline_seconds is not None:
                tasks = [{"deadline_seconds": deadline_seconds, **t} for t in tasks]
            plan = _validate_plan({"team": team, "goal": goal, "tasks": tasks, **extra})
            check_plan(plan, artifacts)
            return plan

        plan: Plan = self._converse(prompt, build, purpose="plan")
        spent = self._spend_since(start)
        return plan.model_copy(update={"planning_spend": spent})

    def _converse(
        self, prompt: str, build: Callable[[list[dict[str, Any]]], Any], *, purpose: str
    ) -> Any:
        messages = [ChatMessage("system", PLANNER_SYSTEM), ChatMessage("user", prompt)]
        reason = "no answer"
        for round_ in range(1, self.max_rounds + 1):
            try:
                completion = self.model.complete(
                    messages, json_schema=plan_schema(), max_tokens=self.max_tokens
                )
            except ModelError as exc:
                raise PlanningFailed(f"the planner's model call failed: {exc}") from None
            self._count(completion, purpose, round_)
            try:
                return build(_tasks_of(completion))
            except PlanRejected as exc:
                reason = str(exc)
            self.on_event(
                "planner.rejected", {"purpose": purpose, "round": round_, "reason": reason}
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
        self.usage = self.usage + completion.usage
        self.calls += 1
        self.unpriced += 0 if completion.priced else 1
        self.on_event(
            "planner.call",
            {
                "purpose": purpose,
                "round": round_,
                "model": f"{completion.provider}:{completion.model}",
                "input_tokens": completion.usage.input_tokens,
                "output_tokens": completion.usage.output_tokens,
                "cost_usd": round(completion.usage.cost_usd, 8),
            },
        )

    def _spend_since(self, start: tuple[Usage, int, int]) -> Spend:
        usage, calls, unpriced = start
        return Spend(
            input_tokens=self.usage.input_tokens - usage.input_tokens,
            output_tokens=self.usage.output_tokens - usage.output_tokens,
            cost_usd=round(max(0.0, self.usage.cost_usd - usage.cost_usd), 8),
            calls=self.calls - calls,
            unpriced=self.unpriced - unpriced,
            model=f"{self.model.provider}:{self.model.name}",
        )

    # --- splitting ---------------------------------------------------------------------

    def split(
        self,
        task: PlanTask,
        failures: list[str],
        artifacts: list[Artifact],
        *,
        taken: set[str],
        max_parts: int = 5,
    ) -> tuple[list[PlanTask], Spend]:
        """Smaller tasks that together do ``task``'s goal, ids prefixed ``<task>.``, within its
        scope, grounded; the caller's ``taken`` ids are avoided. PlanningFailed if none."""
        start = self.usage, self.calls, self.unpriced
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

        def build(raw: list[dict[str, Any]]) -> list[PlanTask]:
            if not 2 <= len(raw) <= max_parts:
                raise PlanRejected(f"give 2 to {max_parts} tasks, not {len(raw)}")
            parts = _prefixed(task, raw, taken)
            check_scopes(parts, within=task.scope)
            check_grounding(parts, artifacts)
            return parts

        parts: list[PlanTask] = self._converse(prompt, build, purpose=f"split:{task.id}")
        return parts, self._spend_since(start)


def _tasks_of(completion: Completion) -> list[dict[str, Any]]:
    try:
        value = completion.json()
    except ValueError as exc:
        raise PlanRejected(f"the answer is not JSON ({exc})") from None
    if isinstance(value, dict) and isinstance(value.get("tasks"), list):
        tasks = value["tasks"]
    elif isinstance(value, list):
        tasks = value
    else:
        raise PlanRejected('the answer must be a JSON object {"tasks": [...]}')
    if not tasks:
        raise PlanRejected("the plan has no tasks")
    if not all(isinstance(t, dict) for t in tasks):
        raise PlanRejected("every task must be a JSON object")
    return list(tasks)


def _validate_plan(data: dict[str, Any]) -> Plan:
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanRejected(str(translate(exc, source="plan"))) from None
    except ProtocolError as exc:
        raise PlanRejected(str(exc)) from None


def _prefixed(parent: PlanTask, raw: list[dict[str, Any]], taken: set[str]) -> list[PlanTask]:
    """Children of ``parent`` with ids ``<parent>.<id>``, depending on each other and on
    the parent's own dependencies; scope defaults to none, deadline to the parent's."""
    mapping: dict[str, str] = {}
    for item in raw:
        short = str(item.get("id", "")).strip()
        new = f"{parent.id}.{short}"
        if new in taken or new in mapping.values():
            raise PlanRejected(f"task id {short!r} is not unique")
        mapping[short] = new
    parts = []
    for index, item in enumerate(raw):
        deps = [str(d) for d in item.get("depends_on", []) or []]
        unknown = [d for d in deps if d not in mapping]
        if unknown:
            raise PlanRejected(
                f"tasks[{index}].depends_on names {unknown[0]!r}, which is none of the split tasks"
            )
        data = {
            "deadline_seconds": parent.deadline_seconds,
            "capability": parent.capability,
            "max_attempts": parent.max_attempts,
            **item,
            "id": mapping[str(item.get("id", "")).strip()],
            "depends_on": [*parent.depends_on, *(mapping[d] for d in deps)],
        }
        if parent.executor and "executor" not in item:
            data["executor"] = parent.executor
        try:
            parts.append(PlanTask.model_validate(data))
        except ValidationError as exc:
            raise PlanRejected(str(translate(exc, source=f"tasks[{index}]"))) from None
        except ProtocolError as exc:
            raise PlanRejected(str(exc)) from None
    try:
        check_plan_graph(parts + [PlanTask(id=d, goal="done") for d in parent.depends_on])
    except ProtocolError as exc:
        raise PlanRejected(str(exc)) from None
    return parts
