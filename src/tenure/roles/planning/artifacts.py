"""The artifacts a team can reach: what a plan may name, and nothing else.

The list is the planner's ground truth: a task that names a file or URL no artifact
covers is rejected (see ``plan_checks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tenure.executors.llm_materials import in_scope
from tenure.executors.paths import URL_PREFIXES, PathOutside, inside
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
    """``--artifact`` values: URLs as they are; paths must exist inside ``workdir`` (an
    absolute path, a ``..`` or a symlink leading out is refused); a directory lists its
    files too, leaving out those that lead out of ``workdir``. ConfigError naming the
    first one that is missing or outside."""
    root = workdir or Path(".")
    out: list[Artifact] = []
    for value in values:
        if value.startswith(URL_PREFIXES):
            out.append(Artifact(value, "url"))
            continue
        try:
            path = inside(value, root, field="artifact")
        except PathOutside as exc:
            raise ConfigError(f"{exc}: list what the team may reach inside --workdir") from None
        if path.is_file():
            out.append(Artifact(value, "file", f"{path.stat().st_size} bytes"))
        elif path.is_dir():
            files, left_out = _listing(root, path)
            about = f"{left_out} file(s) leading out of the working directory left out"
            about = about if left_out else ""
            out.append(Artifact(value.rstrip("/") + "/", "dir", about))
            out += files
        else:
            raise ConfigError(
                f"artifact {value!r} does not exist (looked in {root.resolve()}): "
                "give files, directories or http(s) URLs the team can reach"
            )
    return out


def _listing(root: Path, directory: Path) -> tuple[list[Artifact], int]:
    """The files under ``directory`` (up to MAX_LISTED), named from ``root``, and how many
    were left out because they lead outside ``root``."""
    base = root.resolve()
    found: list[Artifact] = []
    left_out = 0
    for file in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = file.relative_to(base).as_posix()
        try:
            inside(name, base, field="artifact")
        except PathOutside:
            left_out += 1
            continue
        if len(found) < MAX_LISTED:
            found.append(Artifact(name, "file", f"{file.stat().st_size} bytes"))
    return found, left_out
