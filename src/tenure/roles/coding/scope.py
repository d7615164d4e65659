"""Plan-level checks for a coding run: safe ids, scopes inside the repository, a command
check per task; whether a path is in a task's scope; the merge order; overlapping scopes."""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import Path

from tenure.executors.paths import inside
from tenure.executors.worktrees import TENURE_DIR
from tenure.protocol import CommandCheck, Plan
from tenure.protocol.errors import ProtocolError
from tenure.protocol.ids import check_task_id


def check_tasks(root: Path, plan: Plan) -> None:
    """Every task: a safe id, a scope inside the repository, a command check."""
    for index, task in enumerate(plan.tasks):
        check_task_id(task.id, f"tasks[{index}].id")
        for j, scope in enumerate(task.scope):
            check_scope(root, scope, f"tasks[{index}].scope[{j}]")
        if task.team is not None:
            raise ProtocolError(
                f"tasks[{index}].team", "no nested team in a coding run; give it its own tasks"
            )
        for j, check in enumerate(task.checks):
            if check.kind == "quorum":
                raise ProtocolError(
                    f"tasks[{index}].checks[{j}]",
                    "a check a coding task can run; a quorum of agents editing one branch is not",
                )
        if not any(isinstance(c, CommandCheck) for c in task.checks):
            raise ProtocolError(
                f"tasks[{index}].checks",
                f"at least one command check for {task.id!r}: the leader accepts a coding "
                "task only on commands it runs itself, on a fresh checkout of the change",
            )


def check_scope(root: Path, scope: str, field_name: str) -> None:
    inside(scope, root, field=field_name)  # no absolute path, ~, .. or symlink leading out
    first = posixpath.normpath(scope).split("/")[0]
    if first in (".git", TENURE_DIR):
        raise ProtocolError(field_name, f"a path outside {first}/ (reserved); got {scope!r}")


def in_scope(path: str, scopes: list[str]) -> bool:
    if path.split("/")[0] in (TENURE_DIR, ".git"):
        return False
    if not scopes:
        return True
    for scope in scopes:
        normal = posixpath.normpath(scope).rstrip("/")
        if normal in ("", "."):
            return True
        if path == normal or path.startswith(normal + "/") or fnmatch.fnmatchcase(path, scope):
            return True
    return False


def overlapping_scopes(plan: Plan) -> list[str]:
    """Pairs of tasks that may run at the same time (neither depends on the other) and may
    change the same paths: each pair is a merge conflict waiting to happen."""
    after: dict[str, set[str]] = {}
    for task_id in merge_order(plan):
        task = plan.task(task_id)
        after[task_id] = set(task.depends_on).union(*(after[d] for d in task.depends_on))
    found = []
    tasks = plan.tasks
    for i, a in enumerate(tasks):
        for b in tasks[i + 1 :]:
            if a.id in after[b.id] or b.id in after[a.id]:
                continue
            shared = [
                f"{x} ~ {y}" if x != y else x
                for x in a.scope or ["."]
                for y in b.scope or ["."]
                if in_scope(posixpath.normpath(x), [y]) or in_scope(posixpath.normpath(y), [x])
            ]
            if shared:
                found.append(
                    f"{a.id} and {b.id} may both change {', '.join(shared)}; a conflict "
                    f"re-dispatches {b.id}: consider depends_on or disjoint scopes"
                )
    return found


def merge_order(plan: Plan) -> list[str]:
    """Plan order, except that a task never comes before a task it depends on."""
    placed: list[str] = []
    left = list(plan.tasks)
    while left:
        for task in left:
            if all(d in placed for d in task.depends_on):
                placed.append(task.id)
                left.remove(task)
                break
    return placed
