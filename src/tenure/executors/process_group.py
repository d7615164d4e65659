"""The processes an executor starts: each in its own session, tied to the member.

Agents and commands spawn their own children (shells, test runners, dev
servers); killing only the direct child leaves those running, so executors
start each child in a new session and end the whole group.

A child must not outlive the member that started it (its effect would finish
after another member took the attempt over), so ``start_child``:

- asks Linux to SIGKILL the child the moment its parent dies
  (``PR_SET_PDEATHSIG``; a SIGKILLed member included);
- keeps the group in a registry that ``kill_live_children`` ends: the member
  calls it on SIGTERM and on exit;
- describes the child (``ChildProcess``) so the attempt can record it and the
  next holder can kill a group that survived (its grandchildren: the death
  signal reaches only the direct child) with ``reap``, and anything else the
  execution started (``reap_marked``: a grandchild that left the group for a
  session of its own still carries the execution's ``TENURE_RUN_MARK``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

PR_SET_PDEATHSIG = 1
_live: set[int] = set()
_live_lock = threading.Lock()


@dataclass(frozen=True)
class ChildProcess:
    """A started child, as an attempt records it: enough to find it again on this
    machine and to tell it from a later process that reused its pid."""

    pid: int
    pgid: int
    host: str
    boot: str
    started: int  # clock ticks after boot (/proc/PID/stat), 0 where unknown

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _prctl() -> Any:
    """libc's ``prctl``, resolved once in the parent (the child only calls it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def death_signal(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` that sends the child ``sig`` when this process dies (Linux's
    ``PR_SET_PDEATHSIG``), else None. It runs in the child between fork and exec, so
    it does no more than the system call."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()
    kill = int(sig)

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the tie was made
            os._exit(137)

    return tie


def start_child(argv: Sequence[str] | str, **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` in a new session that dies with this process, registered
    so ``kill_live_children`` can end its group."""
    proc: subprocess.Popen[Any] = subprocess.Popen(
        argv, start_new_session=True, preexec_fn=death_signal(), **popen
    )
    with _live_lock:
        _live.add(proc.pid)
    return proc


def forget_child(proc: subprocess.Popen[Any]) -> None:
    """The child was waited for and its group ended: no longer this process's to kill."""
    with _live_lock:
        _live.discard(proc.pid)


def kill_live_children() -> int:
    """SIGKILL the group of every child still registered; how many there were."""
    with _live_lock:
        groups = sorted(_live)
        _live.clear()
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(groups)


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


def describe(proc: subprocess.Popen[Any]) -> ChildProcess:
    return ChildProcess(
        proc.pid, proc.pid, socket.gethostname(), _boot_id(), _start_ticks(proc.pid)
    )


def reap(child: ChildProcess) -> bool:
    """SIGKILL a recorded child's group if it still runs on this machine; True if it
    did. A pid reused since (another start time) is left alone, and so is a group
    on another host or from before a reboot."""
    if (child.host, child.boot) != (socket.gethostname(), _boot_id()):
        return False
    leader = _start_ticks(child.pid)
    if leader and child.started and leader != child.started:
        return False  # the pid is another process now
    # The group id stays reserved while any member of the group lives, so what is
    # found is that group (its leader, or what the leader left behind).
    if not _group_runs(child.pgid):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pgid, signal.SIGKILL)
    return True


def _group_runs(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs (a zombie does not count)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no /proc to look closer: the group answered
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


RUN_MARK = "TENURE_RUN_MARK"
"""Set in the environment of every process an attempt's executor starts: the mark of
that execution, which every descendant inherits whatever group or session it moves to."""


def reap_marked(marks: set[str]) -> list[int]:
    """SIGKILL every process of this user on this machine whose environment carries one
    of ``marks`` (``TENURE_RUN_MARK``); the pids killed. This finds what an earlier
    holder's child left behind in a session of its own, out of its recorded group."""
    wanted = {f"{RUN_MARK}={mark}".encode() for mark in marks if mark}
    killed = []
    for pid in _pids() if wanted else []:
        if pid == os.getpid() or not wanted & _environ(pid):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def _pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _environ(pid: int) -> set[bytes]:
    """The environment ``pid`` started with, if it is ours to read and not a zombie."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return set()
    try:
        with open(f"/proc/{pid}/environ", "rb") as found:
            return set(found.read().split(b"\0"))
    except OSError:
        return set()


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as found:
            return found.read().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name: state, ppid, pgrp, ... ([] if gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as found:
            return found.read().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def _start_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else 0
