"""Whether an agent CLI is installed here, and which version: for ``tenure agents``.

``PROGRAM --version`` runs with the allowlisted environment, stdin from
``/dev/null``, a home of its own (a CLI may write there on first start) and a short
timeout, in its own session so a CLI that hangs is ended with all it started.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tenure.executors.environment import child_env
from tenure.executors.process_group import kill_group

VERSION_TIMEOUT = 10.0


@dataclass(frozen=True)
class Installed:
    """``path`` None: not on PATH; ``version`` the first line ``--version`` printed;
    ``problem`` why there is no version (timed out, failed)."""

    program: str
    path: str | None
    version: str | None = None
    problem: str = ""


def probe(program: str, *, timeout: float = VERSION_TIMEOUT) -> Installed:
    path = shutil.which(program)
    if path is None:
        return Installed(program, None, problem="not on PATH")
    with tempfile.TemporaryDirectory(prefix="tenure-probe-") as home:
        env = child_env({"HOME": home, "XDG_CONFIG_HOME": home, "XDG_CACHE_HOME": home})
        try:
            proc = subprocess.Popen(
                [path, "--version"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=home,
                start_new_session=True,
            )
        except OSError as exc:
            return Installed(program, path, problem=f"cannot run it: {exc.strerror}")
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc, 0.5)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=2)
            return Installed(program, path, problem=f"--version gave no answer in {timeout:g}s")
    lines = [line.strip() for line in (stdout or stderr).splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return Installed(program, path, problem=f"--version exited with status {proc.returncode}")
    return Installed(program, path, lines[0][:120])


def probe_all(programs: Sequence[str], *, timeout: float = VERSION_TIMEOUT) -> list[Installed]:
    """Every program probed at once (each CLI takes its own time to start)."""
    if not programs:
        return []
    with ThreadPoolExecutor(max_workers=len(programs)) as pool:
        return list(pool.map(lambda p: probe(p, timeout=timeout), programs))
