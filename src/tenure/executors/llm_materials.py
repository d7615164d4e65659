"""The files an LLM worker reads, and the scope it may write to.

Materials are the files the task's input names, read by the executor (never by the
model) so each cited source can carry the time it was read.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenure.protocol import TaskEnvelope

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
    ``output_file`` is what it writes, not what it reads."""
    root = (workdir or Path(".")).resolve()
    out: dict[str, Material] = {}
    named = {k: v for k, v in envelope.input.items() if k not in (*SKIP_INPUT_KEYS, "output_file")}
    for name in _strings(named):
        if name in out or "://" in name or len(name) > 500 or "\n" in name:
            continue
        path = (root / name).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if len(text) > limit:
            text = text[:limit] + f"\n[... cut at {limit} characters]"
        out[name] = Material(name, path, text, datetime.now(UTC))
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def in_scope(path: str, scope: list[str]) -> bool:
    """True if ``path`` is a scope entry, lies under a directory entry, or matches a glob."""
    clean = path.strip("/")
    for entry in scope:
        item = entry.strip("/")
        if clean == item or clean.startswith(f"{item}/") or fnmatch.fnmatch(clean, item):
            return True
    return False
