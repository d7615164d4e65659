"""The files an LLM worker reads, and the scope it may write to.

Materials are the files the task's input names, read by the executor (never by the
model) so each cited source can carry the time it was read. Both they and the output
file stay inside the working directory (``executors.paths.inside``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenure.executors.paths import inside
from tenure.protocol import ProtocolError, TaskEnvelope

MATERIAL_LIMIT = 20_000  # characters of one file shown to the model
SKIP_INPUT_KEYS = ("from_dependencies", "operator_answers")


@dataclass
class Material:
    """A file named in the input, read for the model."""

    name: str
    path: Path
    text: str
    read_at: datetime


def read_materials(
    envelope: TaskEnvelope, workdir: Path | None, limit: int = MATERIAL_LIMIT
) -> dict[str, Material]:
    """Files the input names (relative paths inside the workdir), read now; the task's own
    ``output_file`` is what it writes, not what it reads. A string naming no file is text.

    A string that names a file outside the workdir (an absolute path, a ``..``, a symlink
    leading out) is refused: :class:`~tenure.executors.paths.PathOutside` naming the field."""
    root = (workdir or Path(".")).resolve()
    out: dict[str, Material] = {}
    named = {k: v for k, v in envelope.input.items() if k not in (*SKIP_INPUT_KEYS, "output_file")}
    for where, name in input_strings(named, "input"):
        if name in out or "://" in name or len(name) > 500 or "\n" in name:
            continue
        try:
            named_file = (root / name).is_file()
        except (OSError, ValueError):  # a name too long for the filesystem, a NUL
            continue
        if not named_file:
            continue  # text, not a file
        path = inside(name, root, field=where)
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(limit + 1)
        except OSError:
            continue
        if len(text) > limit:
            text = text[:limit] + f"\n[... cut at {limit} characters]"
        out[name] = Material(name, path, text, datetime.now(UTC))
    return out


def input_strings(value: Any, where: str) -> list[tuple[str, str]]:
    """Every string in ``value`` with the field it is in (``input.pages[1]``)."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in input_strings(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [s for i, item in enumerate(value) for s in input_strings(item, f"{where}[{i}]")]
    return []


def check_output_file(envelope: TaskEnvelope, workdir: Path | None) -> Path | None:
    """Where ``input.output_file`` is written: inside the task's scope and the workdir.

    None when the task names no output file; PathOutside or OutsideScope (one line
    naming ``input.output_file``) when it may not be written."""
    target = envelope.input.get("output_file")
    if not isinstance(target, str) or not target:
        return None
    if not in_scope(target, envelope.scope):
        raise OutsideScope(
            "input.output_file", f"{target!r} is outside the task's scope {envelope.scope}"
        )
    return inside(target, workdir, field="input.output_file")


class OutsideScope(ProtocolError):
    """A file the task would write lies outside the task's own scope."""


def in_scope(path: str, scope: list[str]) -> bool:
    """True if ``path`` is a scope entry, lies under a directory entry, or matches a glob."""
    clean = path.strip("/")
    for entry in scope:
        item = entry.strip("/")
        if clean == item or clean.startswith(f"{item}/") or fnmatch.fnmatch(clean, item):
            return True
    return False
