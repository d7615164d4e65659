"""Agent CLIs in a sandbox: bubblewrap (``bwrap``), where it is installed and works.

The agent sees the whole filesystem read-only and may write only where its
attempt needs to::

    bwrap --die-with-parent --new-session --unshare-pid --cap-drop ALL
          --ro-bind / /  --dev /dev  --proc /proc
          [--bind HOME HOME]                      only with --share-home
          --ro-bind REPO REPO  --ro-bind COMMON COMMON
          --bind ATTEMPT_HOME ATTEMPT_HOME        .tenure/attempts/RUN/TASK-N/home
          --bind WORKTREE WORKTREE                .tenure/worktrees/RUN/TASK-N
          --bind GITDIR GITDIR                    COMMON/worktrees/NAME (its index, HEAD)
          --chdir WORKTREE -- AGENT ARGV...

so the user's checkout, ``.git`` (config, hooks, objects, refs), the state
database, other attempts' worktrees and logs are read-only, and the rest of the
machine too. ``--cap-drop ALL`` matters when the leader runs as root (bwrap keeps
root's capabilities otherwise, and root could remount ``/`` writable);
``--unshare-pid`` with ``--die-with-parent`` ends every process the agent left
behind when it exits or is killed. The network is left as it is (agents call
their model's API). Reads are not restricted: a sandbox limits where an agent
writes, not what it may read.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SandboxMode = Literal["auto", "bwrap", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "bwrap", "off")
BASE_ARGS = (
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
)


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap is installed and can build a sandbox here; else why not."""
    path = shutil.which("bwrap")
    if path is None:
        return "bwrap (bubblewrap) is not installed"
    try:
        proc = subprocess.run(
            [path, *BASE_ARGS, "true"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run here: {exc}"
    if proc.returncode != 0:
        return f"bwrap cannot build a sandbox here: {(proc.stderr or proc.stdout).strip()[:300]}"
    return None


@dataclass(frozen=True)
class Layout:
    """What one agent may write, and what is put back read-only after a shared home."""

    workdir: Path
    writable: Sequence[Path]
    protect: Sequence[Path] = ()
    shared_home: Path | None = None
    extra: Sequence[str] = field(default_factory=tuple)

    def argv(self, command: Sequence[str]) -> list[str]:
        bwrap = shutil.which("bwrap") or "bwrap"
        out = [bwrap, *BASE_ARGS]
        if self.shared_home is not None:
            home = str(self.shared_home.resolve())
            out += ["--bind", home, home]
        for path in dict.fromkeys(str(p.resolve()) for p in self.protect):
            out += ["--ro-bind", path, path]
        for path in dict.fromkeys(str(p.resolve()) for p in self.writable):
            out += ["--bind", path, path]
        out += [*self.extra, "--chdir", str(self.workdir.resolve()), "--", *command]
        return out
