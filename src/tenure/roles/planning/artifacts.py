"""The artifacts a team can reach: what a plan may name, and nothing else.

The list is the planner's ground truth: a task that names a file or URL no artifact
covers is rejected (see ``plan_checks``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tenure.executors.llm_materials import in_scope
from tenure.protocol.errors import ConfigError

ArtifactKind = Literal["file", "dir", "url", "input"]
MAX_LISTED = 200


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
