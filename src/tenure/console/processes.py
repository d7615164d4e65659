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
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tenure.executors.process_group import death_signal, kill_live_children
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
    die_with_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``tenure ARGS`` in its own session (so signals reach only it), with
    ``store_url`` in its ``TENURE_STORE``; a ``--store`` in ARGS is refused.

    ``die_with_parent``: on Linux the child gets SIGTERM when this thread's process
    dies, even by SIGKILL, which leaves no chance to stop it (call from a thread
    that lives as long as the process: the main one)."""
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
            preexec_fn=death_signal(signal.SIGTERM) if die_with_parent else None,
        )
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


def stop_all(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM (and SIGCONT, in case one is paused), then SIGKILL what still runs once
    ``timeout`` seconds have passed (one grace for all of them)."""
    for proc in procs:
        if proc.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    break
    deadline = time.monotonic() + timeout  # one grace for them all, not one each
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


STOP_GRACE = 5.0
"""Seconds a member has, after SIGTERM or SIGINT, to end what it is doing (its executors
see ``ctx.cancelled``); past them it exits and abandons the rest (``stop_on_signals``)."""


def stop_on_signals(
    stop: threading.Event,
    also: Callable[[], object] | None = None,
    said: Callable[[str], object] | None = None,
    *,
    grace: float | None = None,
    abandoned: Callable[[str], object] | None = None,
) -> None:
    """SIGTERM and SIGINT set ``stop``: a member finishes its step and leaves cleanly.
    ``also`` runs first (a worker ends its executors' processes: they die with it);
    ``said`` is told the signal's name, the first time, to say the member is stopping.

    With ``grace``, the process does not wait for a step that will not end: ``grace``
    seconds after the first signal, or at once on a second one, it exits (status 0 after
    the grace, 128 + the signal's number at a second signal), ``abandoned`` told why
    first. What it still ran is left as it stood: every write is atomic, and its claims
    lapse with its heartbeat, so the leader retries the work elsewhere."""
    first = threading.Event()

    def handler(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if first.is_set() and grace is not None:
            _exit_now(abandoned, f"{name} again: stopping at once", 128 + signum)
        first.set()
        if said is not None and not stop.is_set():
            said(name)
        if also is not None:
            also()
        stop.set()
        if grace is not None:
            why = f"still busy {grace:g} s after {name}: stopping now"
            timer = threading.Timer(grace, _exit_now, args=(abandoned, why, 0))
            timer.daemon = True
            timer.start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _exit_now(say: Callable[[str], object] | None, why: str, code: int) -> None:
    """Leave the process at once (no thread is waited for), its output flushed."""
    if say is not None:
        say(why)
    kill_live_children()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing more can be said
    os._exit(code)


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached a process that owns members: unwind, stopping them."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def terminated_on_signals(stopping: Callable[[str], object] | None = None) -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``Terminated`` in the main thread (once), so the
    ``finally`` that stops a run's members runs; the old handlers come back after.
    ``stopping``, if given, is told what stops the run (``interrupted`` for Ctrl-C,
    ``SIGTERM``...) before it unwinds, and SIGINT raises ``KeyboardInterrupt`` once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = threading.Event()

    def handler(signum: int, frame: object) -> None:
        if raised.is_set():
            return
        raised.set()
        if stopping is not None:
            stopping("interrupted" if signum == signal.SIGINT else signal.Signals(signum).name)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    caught = (signal.SIGTERM, signal.SIGHUP, *((signal.SIGINT,) if stopping else ()))
    old = {sig: signal.signal(sig, handler) for sig in caught}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
