"""Starting and stopping member processes of a team (``tenure run``, the demo).

A member is Tenure itself, run by the operator: it inherits the operator's
environment (an LLM worker needs its model key) and is given the store URL in
``TENURE_STORE``, never on its command line, where ``ps`` would show its password.
The work a member runs gets the allowlisted environment (``executors.environment``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from tenure.protocol.errors import ConfigError
from tenure.store.url import ENV_VAR as STORE_VAR


def tenure_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "tenure", *args]


def spawn(
    args: Sequence[str],
    *,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    store_url: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``tenure ARGS`` in its own session (so signals reach only it), with
    ``store_url`` in its ``TENURE_STORE``; a ``--store`` in ARGS is refused."""
    if any(arg == "--store" or arg.startswith("--store=") or arg == "-s" for arg in args):
        raise ConfigError("a member's store URL goes in TENURE_STORE, never on its command line")
    child = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if store_url is not None:
        child[STORE_VAR] = store_url
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            tenure_argv(*args),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=child,
        )
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


def stop_all(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 5.0) -> None:
    """SIGTERM (and SIGCONT, in case one is paused), then SIGKILL what still runs."""
    for proc in procs:
        if proc.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    break
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop``: a member finishes its step and leaves cleanly."""

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
