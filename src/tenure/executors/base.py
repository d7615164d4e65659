"""The executor interface: one envelope in, one result out.

Executors are deliberately small so Python callables, shell commands, LLM
calls and coding-agent CLIs all fit. What a follower lends an executor —
progress check-ins and task-scoped idempotent effects — travels in
``TaskContext``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from tenure.protocol import CommandEvidence, ProtocolError, TaskEnvelope, TaskResult
from tenure.protocol.codec import translate

T = TypeVar("T")


def _no_progress(message: str, fraction: float | None) -> None:
    return None


def _run_directly(key: str, fn: Callable[[], Any]) -> Any:
    return fn()


def _no_record(kind: str, data: dict[str, Any]) -> None:
    return None


@dataclass
class TaskContext:
    """What the follower lends the executor for one attempt."""

    worker_id: str
    team: str
    workdir: Path | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    report_progress: Callable[[str, float | None], None] = _no_progress
    run_effect: Callable[[str, Callable[[], Any]], Any] = _run_directly
    envelope: TaskEnvelope | None = None
    record_event: Callable[[str, dict[str, Any]], None] = _no_record

    def progress(self, message: str, fraction: float | None = None) -> None:
        """A check-in to the leader; the follower restates the criteria with it."""
        self.report_progress(message, fraction)

    def record(self, kind: str, data: dict[str, Any]) -> None:
        """Append an event to the team's log (e.g. ``model.call`` with tokens and cost)."""
        self.record_event(kind, data)

    def effect(self, name: str, fn: Callable[[], T]) -> T:
        """Run a side effect at most once per task (key ``<task_id>:<name>``), across
        attempts, workers and leaders; later calls return the recorded result."""
        task_id = self.envelope.task_id if self.envelope else "task"
        result: T = self.run_effect(f"{task_id}:{name}", fn)
        return result


class Executor(Protocol):
    """Anything that can do one attempt of a task."""

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult: ...


def make_result(envelope: TaskEnvelope, status: str = "completed", **fields: Any) -> TaskResult:
    """A result for ``envelope`` with its task id, key and epoch filled in."""
    return TaskResult.model_validate(
        {
            "task_id": envelope.task_id,
            "idempotency_key": envelope.idempotency_key,
            "epoch": envelope.epoch,
            "status": status,
            **fields,
        }
    )


def failed(
    envelope: TaskEnvelope, reason: str, *, output: str = "", command: str = ""
) -> TaskResult:
    """A failed result whose evidence carries the reason, for the next attempt's history."""
    evidence = [
        CommandEvidence(command=command or "(executor)", exit_code=1, output=output or reason)
    ]
    return make_result(envelope, "failed", notes={"uncertain": [reason]}, evidence=evidence)


def coerce_result(envelope: TaskEnvelope, value: Any) -> TaskResult:
    """Accept a TaskResult, a result-shaped dict (has ``status``), or a bare artifact."""
    if isinstance(value, TaskResult):
        return value
    if isinstance(value, dict) and "status" in value:
        data = {
            "task_id": envelope.task_id,
            "idempotency_key": envelope.idempotency_key,
            "epoch": envelope.epoch,
            **value,
        }
        try:
            return TaskResult.model_validate(data)
        except ValidationError as exc:
            raise translate(exc, source="result") from None
    return make_result(envelope, "completed", artifact=value)


def safe_result(envelope: TaskEnvelope, produce: Callable[[], Any]) -> TaskResult:
    """Run ``produce`` and turn anything it returns or raises into a valid result."""
    try:
        return coerce_result(envelope, produce())
    except ProtocolError as exc:
        return failed(envelope, f"the executor returned an invalid result: {exc}")
    except Exception as exc:  # an executor bug must not crash the follower
        return failed(envelope, f"{type(exc).__name__}: {exc}")


class UnknownExecutor:
    """The executor an envelope names but this member does not have: each attempt
    fails with that reason instead of running something else."""

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        return failed(envelope, f"unknown executor {self.spec!r}")


class RefusedExecutor:
    """An executor an envelope asked for that this member does not allow: each such
    attempt fails, saying how to allow it, and nothing runs."""

    def __init__(self, spec: str, allowed: tuple[str, ...]) -> None:
        self.spec = spec
        self.allowed = allowed

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        allowed = ", ".join(self.allowed) or "none"
        return failed(
            envelope,
            f"executor {self.spec[:200]!r} is not allowed on this member (allowed: {allowed}); "
            "start it with --allow-exec SPEC to let envelopes choose it",
        )
