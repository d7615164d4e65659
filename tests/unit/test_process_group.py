"""Children of a member die with it: the death signal, the kill on exit, the reap by
the next holder. Real processes and real signals; Linux only (the death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tenure.executors import CommandExecutor, TaskContext
from tenure.executors.process_group import (
    describe,
    forget_child,
    kill_live_children,
    reap,
    reap_marked,
    start_child,
)
from tenure.protocol import TaskEnvelope

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)


def _gone(pid: int, within: float = 10.0) -> bool:
    """True once ``pid`` is gone or a zombie (polls; the kernel acts asynchronously)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_a_child_dies_when_its_member_is_sigkilled(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from tenure.executors.process_group import start_child
        child = start_child(["sleep", "120"])
        print(child.pid, flush=True)
        time.sleep(120)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as member:
        assert member.stdout is not None
        child = int(member.stdout.readline())
        assert not _gone(child, within=0.2)  # the child runs, in a session of its own
        assert os.getsid(child) == child
        member.send_signal(signal.SIGKILL)
        member.wait()
    assert _gone(child)


def test_kill_live_children_ends_each_group_but_not_a_forgotten_one() -> None:
    live = start_child(["sh", "-c", "sleep 120 & wait"])
    done = start_child(["true"])
    done.wait()
    forget_child(done)
    assert kill_live_children() == 1
    live.wait(timeout=10)
    assert live.returncode == -signal.SIGKILL
    assert kill_live_children() == 0


def test_reap_kills_a_recorded_group_that_outlived_its_leader(tmp_path: Path) -> None:
    """The group's leader is gone; what it left in its group is still the group."""
    marker = tmp_path / "grandchild.pid"
    leader = start_child(["sh", "-c", f"sleep 120 & echo $! > {marker}"])
    record = describe(leader)
    leader.wait()
    forget_child(leader)
    grandchild = int(marker.read_text())
    assert not _gone(grandchild, within=0.2)
    assert reap(record)
    assert _gone(grandchild)
    assert not reap(record)  # nothing left to reap


def test_reap_leaves_a_reused_pid_and_another_host_alone() -> None:
    proc = start_child(["sleep", "120"])
    try:
        record = describe(proc)
        assert not reap(replace(record, started=record.started + 1))  # another process now
        assert not reap(replace(record, host=record.host + ".elsewhere"))
        assert not reap(replace(record, boot="before-a-reboot"))
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        forget_child(proc)


def test_reap_marked_finds_a_process_that_left_its_group_by_its_mark() -> None:
    env = {**os.environ, "TENURE_RUN_MARK": "mark-of-an-earlier-run"}
    moved = subprocess.Popen(["sleep", "120"], env=env, start_new_session=True)
    other = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        assert reap_marked({"another-mark"}) == []
        assert reap_marked({"mark-of-an-earlier-run", ""}) == [moved.pid]
        moved.wait(timeout=10)
        assert moved.returncode == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for proc in (moved, other):
            proc.kill()
            proc.wait()


def test_a_cancelled_command_is_stopped_with_its_group(tmp_path: Path) -> None:
    """The queue worker cancels when its hold lapsed, the follower when the attempt is no
    longer its own: the command must not run on to its deadline."""
    marker = tmp_path / "grandchild.pid"
    executor = CommandExecutor(["sh", "-c", f"sleep 120 & echo $! > {marker}; wait"])
    ctx = TaskContext("w1", "team")
    threading.Timer(0.5, ctx.cancelled.set).start()
    started = time.monotonic()
    result = executor.execute(_envelope(deadline=60), ctx)
    assert result.status == "failed"
    assert "cancelled; process group killed" in result.notes.uncertain[0]
    assert time.monotonic() - started < 30  # far inside the deadline
    assert _gone(int(marker.read_text()))


def _envelope(deadline: float = 10) -> TaskEnvelope:
    return TaskEnvelope.model_validate(
        {
            "task_id": "t1",
            "idempotency_key": "t1:attempt-2",
            "epoch": 3,
            "attempt": 2,
            "assigned_to": "w1",
            "deadline_seconds": deadline,
            "goal": "g",
            "reply_to": "leader",
        }
    )


def test_a_python_callable_reads_the_attempts_key_from_its_context() -> None:
    envelope = _envelope()
    assert TaskContext("w1", "team", envelope=envelope).idempotency_key == "t1:attempt-2"
    assert TaskContext("w1", "team").idempotency_key is None
