"""Whether the Tenure under test runs several tasks at once per worker (``--concurrency``).

A benchmark asks before it starts workers: with the option it passes
``--concurrency C``; without it each worker runs one task at a time, and the
bench says so in its output and its JSON (``slots_supported: false``), so no
figure measured with one slot passes for one measured with C.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import subprocess
import sys


@functools.cache
def cli_supports_concurrency(command: str = "worker") -> bool:
    """``tenure COMMAND --help`` lists ``--concurrency`` (not asked when the Python API
    has no slots: the CLI cannot have them then, and the question costs a process)."""
    if not api_supports_concurrency():
        return False
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tenure", command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--concurrency" in done.stdout


def api_supports_concurrency() -> bool:
    """``FollowerConfig`` has a ``concurrency`` field and ``QueueWorker`` takes one."""
    from tenure.roles import FollowerConfig
    from tenure.roles.teams import queue

    fields = {f.name for f in dataclasses.fields(FollowerConfig)}
    params = inspect.signature(queue.QueueWorker).parameters
    return "concurrency" in fields and "concurrency" in params


def concurrency_flags(slots: int, command: str = "worker") -> tuple[list[str], int]:
    """(the flags to pass, the slots each worker really has)."""
    if slots > 1 and cli_supports_concurrency(command):
        return ["--concurrency", str(slots)], slots
    return [], 1


def slots_note(asked: int, got: int) -> str:
    if asked == got:
        return f"{got} slot(s) per Tenure worker"
    return (
        f"this Tenure has no --concurrency: each worker runs 1 task at a time (asked for {asked})"
    )
