"""Ending a child started in its own session: TERM to the whole group, then KILL.

Agents and commands spawn their own children (shells, test runners, dev
servers); killing only the direct child leaves those running, so executors
start each child in a new session and end the whole group.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def kill_group(proc: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM the process group, wait ``grace`` seconds, then SIGKILL it."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
