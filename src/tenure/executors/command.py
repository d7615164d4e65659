"""A shell command as an executor: envelope JSON on stdin, result JSON on stdout.

A non-zero exit, a deadline overrun or output that is not a result becomes a
failed result carrying stderr or the parse error as evidence, so the next
attempt sees what went wrong. The command gets the allowlisted environment
(``executors.environment``), the executor's own ``env``, the variables it names in
``pass_env``, and the task's ``TENURE_TASK_ID``, ``TENURE_IDEMPOTENCY_KEY``,
``TENURE_EPOCH``, ``TENURE_ATTEMPT``, ``TENURE_WORKER`` and ``TENURE_TEAM``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tenure.executors.base import TaskContext, coerce_result, failed
from tenure.executors.environment import child_env
from tenure.executors.process_group import kill_group
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, to_json

OUTPUT_LIMIT = 4000


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
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd or ctx.workdir,
                env=self._environment(envelope, ctx),
                start_new_session=True,
                text=True,
            )
        except OSError as exc:
            return failed(envelope, f"cannot start {self.argv[0]!r}: {exc.strerror}", command=shown)
        try:
            stdout, stderr = proc.communicate(to_json(envelope), timeout=envelope.deadline_seconds)
        except subprocess.TimeoutExpired:
            kill_group(proc, self.grace_seconds)
            stdout, stderr = proc.communicate()
            reason = f"deadline of {envelope.deadline_seconds:g}s exceeded; process group killed"
            return failed(envelope, reason, output=_tail(stderr), command=shown)
        if proc.returncode != 0:
            reason = f"command exited with status {proc.returncode}"
            return failed(envelope, reason, output=_tail(stderr or stdout), command=shown)
        return self._parse(envelope, stdout, shown)

    def _parse(self, envelope: TaskEnvelope, stdout: str, shown: str) -> TaskResult:
        try:
            value = json.loads(stdout)
        except json.JSONDecodeError as exc:
            reason = f"stdout is not JSON ({exc.msg} at line {exc.lineno})"
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
            },
            pass_names=self.pass_env,
        )

    def __repr__(self) -> str:
        return f"CommandExecutor({shlex.join(self.argv)!r})"


def _tail(text: str | None) -> str:
    text = text or ""
    return text[-OUTPUT_LIMIT:]
