"""A shell command as an executor: envelope JSON on stdin, result JSON on stdout.

A non-zero exit, a deadline overrun or output that is not a result becomes a
failed result carrying stderr or the parse error as evidence, so the next
attempt sees what went wrong. The command gets the allowlisted environment
(``executors.environment``), the executor's own ``env``, the variables it names in
``pass_env``, and the task's ``TENURE_TASK_ID``, ``TENURE_IDEMPOTENCY_KEY``,
``TENURE_EPOCH``, ``TENURE_ATTEMPT``, ``TENURE_WORKER``, ``TENURE_TEAM`` and the
execution's ``TENURE_RUN_MARK``.

The command runs in its own session and dies with the member
(``process_group.start_child``); what it leaves running in its group when it
exits is killed, and so is its group when the attempt is cancelled.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tenure.executors.base import TaskContext, coerce_result, failed, too_large
from tenure.executors.capture import Capture, Captured
from tenure.executors.environment import child_env
from tenure.executors.process_group import (
    RUN_MARK,
    describe,
    forget_child,
    kill_group,
    start_child,
)
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, to_json
from tenure.protocol.limits import MAX_RESULT_BYTES, decode_json

OUTPUT_LIMIT = 4000
CANCEL_POLL = 0.2  # how often a running command looks at ctx.cancelled, seconds


class CommandExecutor:
    def __init__(
        self,
        command: str | Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        pass_env: Sequence[str] = (),
        grace_seconds: float = 2.0,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise ProtocolError("command", "a non-empty command line")
        self.cwd = cwd
        self.env = dict(env or {})
        self.pass_env = tuple(pass_env)
        self.grace_seconds = grace_seconds

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        shown = shlex.join(self.argv)
        try:
            proc = start_child(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd or ctx.workdir,
                env=self._environment(envelope, ctx),
            )
        except OSError as exc:
            return failed(envelope, f"cannot start {self.argv[0]!r}: {exc.strerror}", command=shown)
        try:
            ctx.child_started(describe(proc))
            # stdout is the result: its beginning is kept, up to one byte over the limit
            capture = Capture(
                proc, to_json(envelope), stdout_head=MAX_RESULT_BYTES + 1, stderr_tail=OUTPUT_LIMIT
            )
            stopped = self._wait(proc, envelope, ctx)
            _end_group(proc)  # before reading: a leftover must not hold the pipes open
            stdout, stderr = capture.streams()
        finally:
            _end_group(proc)
            forget_child(proc)
        if stopped:
            return failed(envelope, stopped, output=_tail(stderr.text), command=shown)
        return self._outcome(envelope, proc.returncode, stdout, stderr, shown)

    def _outcome(
        self, envelope: TaskEnvelope, code: int, stdout: Captured, stderr: Captured, shown: str
    ) -> TaskResult:
        if code != 0:
            reason = f"command exited with status {code}"
            return failed(envelope, reason, output=_tail(stderr.text or stdout.text), command=shown)
        if stdout.size > MAX_RESULT_BYTES:
            reason = too_large("stdout", stdout.size)
            return failed(envelope, reason, output=_tail(stderr.text), command=shown)
        return self._parse(envelope, stdout.text, shown)

    def _wait(self, proc: subprocess.Popen[bytes], envelope: TaskEnvelope, ctx: TaskContext) -> str:
        """Why the command was stopped ('' if it was not): its deadline passed, or
        ``ctx.cancelled`` was set (the task was cancelled, or this member no longer holds
        the attempt). Either kills its process group."""
        deadline = time.monotonic() + envelope.deadline_seconds
        while True:
            left = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(0.0, min(left, CANCEL_POLL)))
                return ""
            except subprocess.TimeoutExpired:
                pass
            if ctx.cancelled.is_set():
                why = "cancelled; process group killed"
            elif time.monotonic() >= deadline:
                why = f"deadline of {envelope.deadline_seconds:g}s exceeded; process group killed"
            else:
                continue
            kill_group(proc, self.grace_seconds)
            return why

    def _parse(self, envelope: TaskEnvelope, stdout: str, shown: str) -> TaskResult:
        try:
            value = decode_json(stdout, field="stdout", limit=MAX_RESULT_BYTES)
        except ProtocolError as exc:
            if exc.expected.startswith("valid JSON"):  # "stdout is not JSON (Expecting ...)"
                reason = f"stdout is not {exc.expected.removeprefix('valid ')}"
            else:
                reason = f"stdout is not a result: {exc.expected}"
            return failed(envelope, reason, output=_tail(stdout), command=shown)
        try:
            return coerce_result(envelope, value)
        except ProtocolError as exc:
            return failed(envelope, f"stdout is not a valid result: {exc}", command=shown)

    def _environment(self, envelope: TaskEnvelope, ctx: TaskContext) -> dict[str, str]:
        return child_env(
            {
                **self.env,
                "TENURE_TASK_ID": envelope.task_id,
                "TENURE_IDEMPOTENCY_KEY": envelope.idempotency_key,
                "TENURE_EPOCH": str(envelope.epoch),
                "TENURE_ATTEMPT": str(envelope.attempt),
                "TENURE_WORKER": ctx.worker_id,
                "TENURE_TEAM": ctx.team,
                **({RUN_MARK: ctx.run_mark} if ctx.run_mark else {}),
            },
            pass_names=self.pass_env,
        )

    def __repr__(self) -> str:
        return f"CommandExecutor({shlex.join(self.argv)!r})"


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL what the command left running in its group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(text: str | None) -> str:
    text = text or ""
    return text[-OUTPUT_LIMIT:]
