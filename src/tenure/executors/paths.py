"""Paths from plans, models and workers stay inside their working directory.

:func:`inside` is the one check, used wherever Tenure is given a path it will read,
write or hand on: a task's scope and ``input.output_file`` (when a leader loads a
plan, and when the planner checks a model's plan), the files an LLM worker reads
for its model and the file it writes, the planner's artifacts. An absolute path, a
``~`` or a ``..`` is refused as written; a relative path is resolved (symlinks
followed) and refused if it ends up outside. The refusal is one line naming the
field and the path.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from tenure.protocol import PlanTask, ProtocolError

__all__ = ["URL_PREFIXES", "PathOutside", "check_task_paths", "inside", "task_paths"]

URL_PREFIXES = ("http://", "https://")  # what a plan may name that is not a path


class PathOutside(ProtocolError):
    """A path that is, or leads, outside its working directory."""

    def __init__(self, field: str, path: str, why: str) -> None:
        self.path = path
        super().__init__(field, f"a path inside the working directory; {path!r} {why}")


def inside(path: str, workdir: Path | None, *, field: str) -> Path:
    """``path`` resolved inside ``workdir`` (default: the current directory).

    Raises :class:`PathOutside` naming ``field`` for an absolute path, a ``~``, a
    ``..`` part, or a path that resolves (through a symlink) outside."""
    if not path.strip() or "\x00" in path:
        raise PathOutside(field, path, "is not a path")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("\\"):
        raise PathOutside(field, path, "is absolute")
    if path.startswith("~"):
        raise PathOutside(field, path, "starts at a home directory (~)")
    if ".." in pure.parts or ".." in path.split("\\"):
        raise PathOutside(field, path, "goes up with '..'")
    root = (workdir or Path(".")).resolve()
    try:
        resolved = (root / path).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise PathOutside(field, path, "cannot be resolved (a symlink loop?)") from None
    if not resolved.is_relative_to(root):
        raise PathOutside(field, path, "leads outside it through a symlink")
    return resolved


def task_paths(task: PlanTask) -> list[tuple[str, str]]:
    """What a task says it writes, as ``(field, path)``: its scope and ``input.output_file``."""
    found = [(f"scope[{index}]", entry) for index, entry in enumerate(task.scope)]
    output = task.input.get("output_file")
    if isinstance(output, str):
        found.append(("input.output_file", output))
    return found


def check_task_paths(tasks: list[PlanTask], workdir: Path | None, *, where: str = "tasks") -> None:
    """Every task's scope and output file inside ``workdir``, and a nested team's
    artifacts and tasks; :class:`PathOutside` naming the first that is not
    (``tasks[2].scope[0]: ...``)."""
    for index, task in enumerate(tasks):
        for field, path in task_paths(task):
            inside(path, workdir, field=f"{where}[{index}].{field}")
        if task.team is not None:
            here = f"{where}[{index}].team"
            for number, artifact in enumerate(task.team.artifacts):
                if not artifact.startswith(URL_PREFIXES):
                    inside(artifact, workdir, field=f"{here}.artifacts[{number}]")
            check_task_paths(task.team.tasks, workdir, where=f"{here}.tasks")
