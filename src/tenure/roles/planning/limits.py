"""What a model may not do: a plan or a split written by a model is data, not instructions.

The planner's model controls every field of the tasks it writes. The fields that
would make something run, choose who or what runs it, or touch the filesystem are
limited here, and each breach is a plan rule like any other: the planner is told
why and asked again, and a model that keeps at it fails the planning.

Never from a model:

- ``team``: a nested team (its tasks, its artifacts, its name: another team's path);
- ``options``: settings the operator's leader features read;
- ``capability: subteam``: reserved for composite tasks (it reaches the sub-leaders);
- ``input.from_dependencies`` and ``input.operator_answers``: the leader fills them
  in, and a worker reads them as other tasks' results and the operator's word;
- a path outside the working directory: ``scope``, ``input.output_file`` and every
  path-like string in ``input`` (absolute, ``~``, ``..``, or a symlink leading out;
  ``executors.paths.inside``), and an ``output_file`` outside the task's own scope.

Only when the operator allows it (``allow``, ``tenure ... --allow-model``):

- ``commands``: a ``command`` check, which the leader runs in a shell;
- ``executors``: a task's ``executor`` (``command:...``, ``python:...``, ``llm:...``,
  which a worker would run) and a judge check's ``model`` (a model, and a server,
  the leader would send the result to).

A split part may keep what its parent had: the parent's executor, its capability and
its own checks, which the operator (or an earlier check) let through already.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from tenure.executors.llm_materials import SKIP_INPUT_KEYS, in_scope, input_strings
from tenure.executors.paths import URL_PREFIXES, PathOutside, inside, task_paths
from tenure.protocol import CommandCheck, JudgeCheck, PlanTask
from tenure.protocol.errors import ConfigError
from tenure.protocol.plan import SUBTEAM_CAPABILITY
from tenure.roles.planning.checks import PlanRejected, looks_like_reference

__all__ = ["ALLOWABLE", "Allowed", "NotAllowed", "allowance", "check_model_output"]

ALLOWABLE = ("commands", "executors")


class NotAllowed(PlanRejected):
    """A model's plan wrote what a model may not; ``what`` names the limit it broke."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


@dataclass(frozen=True)
class Allowed:
    """Something the operator's allowance let through: it is logged every time."""

    allow: str  # commands | executors
    task_id: str
    field: str
    value: str

    def line(self) -> str:
        what = {"commands": "a command check", "executors": "an executor or judge model"}
        return (
            f"the model's plan adds {what[self.allow]}, allowed by the operator "
            f"({self.allow}): task {self.task_id!r} {self.field} = {self.value!r}"
        )


def allowance(values: Iterable[str]) -> frozenset[str]:
    """The operator's allowance, each name checked; ConfigError naming an unknown one."""
    if isinstance(values, str):
        values = [values]
    found = frozenset(v.strip() for v in values if v.strip())
    unknown = sorted(found - set(ALLOWABLE))
    if unknown:
        raise ConfigError(
            f"cannot allow model output {unknown[0]!r}: allow one of {', '.join(ALLOWABLE)}"
        )
    return found


def check_model_output(
    tasks: list[PlanTask],
    *,
    allow: Collection[str] = frozenset(),
    workdir: Path | None = None,
    parent: PlanTask | None = None,
) -> list[Allowed]:
    """Refuse (NotAllowed, the first breach) what a model may not write in ``tasks``;
    return what ``allow`` let through. ``parent``: the task they split."""
    used: list[Allowed] = []
    for task in tasks:
        used += _check_task(task, allow, workdir, parent)
    return used


def _check_task(
    task: PlanTask, allow: Collection[str], workdir: Path | None, parent: PlanTask | None
) -> list[Allowed]:
    name = f"task {task.id!r}"
    if task.team is not None:
        raise NotAllowed(f"{name} has a nested team: a plan from a model may not add one", "team")
    if task.options:
        keys = ", ".join(sorted(task.options))
        raise NotAllowed(
            f"{name} sets options ({keys}): a plan from a model may not set the leader's "
            "options; leave them out",
            "options",
        )
    if task.capability == SUBTEAM_CAPABILITY and (
        parent is None or parent.capability != task.capability
    ):
        raise NotAllowed(
            f"{name} asks for capability {SUBTEAM_CAPABILITY!r}, which is reserved for nested "
            "teams; leave it out",
            "capability",
        )
    reserved = sorted(set(task.input) & set(SKIP_INPUT_KEYS))
    if reserved:
        raise NotAllowed(
            f"{name} writes input.{reserved[0]}, which the leader fills in; leave it out", "input"
        )
    _check_paths(task, workdir)
    used: list[Allowed] = []
    if task.executor and not (parent is not None and task.executor == parent.executor):
        if "executors" not in allow:
            raise NotAllowed(
                f"{name} names the executor {task.executor!r}: a plan from a model may not "
                "choose what runs a task unless the operator allows executors "
                "(--allow-model executors); leave executor out",
                "executors",
            )
        used.append(Allowed("executors", task.id, "executor", task.executor))
    for index, check in enumerate(task.checks):
        if parent is not None and check in parent.checks:
            continue  # the parent's own check, kept
        field = f"checks[{index}]"
        if isinstance(check, CommandCheck):
            if "commands" not in allow:
                raise NotAllowed(
                    f"{name} {field} is a command check ({check.run!r}): a plan from a model may "
                    "not add commands unless the operator allows them (--allow-model commands); "
                    "use schema or evidence checks",
                    "commands",
                )
            used.append(Allowed("commands", task.id, f"{field}.run", check.run))
        elif isinstance(check, JudgeCheck) and check.model:
            if "executors" not in allow:
                raise NotAllowed(
                    f"{name} {field} names the judge model {check.model!r}: a plan from a model "
                    "may not choose a model unless the operator allows executors "
                    "(--allow-model executors); leave model out",
                    "executors",
                )
            used.append(Allowed("executors", task.id, f"{field}.model", check.model))
    return used


def _check_paths(task: PlanTask, workdir: Path | None) -> None:
    """Scope, output file and every path-like input inside the working directory."""
    named = [(field, path) for field, path in task_paths(task)]
    named += [
        (where, value)
        for where, value in input_strings(task.input, "input")
        if where != "input.output_file"
        and looks_like_reference(value)
        and not value.strip().startswith(URL_PREFIXES)
    ]
    for field, path in named:
        try:
            inside(path.strip(), workdir, field=field)
        except PathOutside as exc:
            raise NotAllowed(f"task {task.id!r} {exc}", "paths") from None
    output = task.input.get("output_file")
    if isinstance(output, str) and not in_scope(output, task.scope):
        raise NotAllowed(
            f"task {task.id!r} input.output_file {output!r} is not in its scope: "
            "put the path in scope too",
            "paths",
        )
