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

from tenure.executors.process_group import ChildProcess
from tenure.protocol import (
    CommandEvidence,
    Notes,
    ProtocolError,
    TaskEnvelope,
    TaskResult,
    to_dict,
)
from tenure.protocol.codec import translate
from tenure.protocol.limits import MAX_RESULT_BYTES, check_depth, human, json_size

REASON_LIMIT = 8 * 1024
"""The most of a failure's reason and output a failed result carries (its end)."""

T = TypeVar("T")


def _no_progress(message: str, fraction: float | None) -> None:
    return None


def _run_directly(key: str, fn: Callable[[], Any]) -> Any:
    return fn()


def _no_record(kind: str, data: dict[str, Any]) -> None:
    return None


def _no_child(child: ChildProcess) -> None:
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
    run_mark: str = ""
    """Names this execution; an executor sets it as ``TENURE_RUN_MARK`` in the
    environment of what it starts, so a survivor is found wherever it moved."""
    child_started: Callable[[ChildProcess], None] = _no_child
    """Told of every process the executor starts (``process_group.start_child``), so
    the attempt records it and the next holder can end it if this member dies."""

    @property
    def idempotency_key(self) -> str | None:
        """The attempt's key (``<task_id>:attempt-<n>``): hand it to an external API
        that de-duplicates (a payment's idempotency key, a unique column), and a
        repeat of this attempt is refused there too."""
        return self.envelope.idempotency_key if self.envelope else None

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
    """A failed result whose evidence carries the reason, for the next attempt's history.
    A reason or output longer than ``REASON_LIMIT`` keeps its beginning and end."""
    reason, output = _clip(reason), _clip(output)
    evidence = [
        CommandEvidence(command=command or "(executor)", exit_code=1, output=output or reason)
    ]
    return make_result(envelope, "failed", notes={"uncertain": [reason]}, evidence=evidence)


def coerce_result(envelope: TaskEnvelope, value: Any) -> TaskResult:
    """Accept a TaskResult, a result-shaped dict (has ``status``), or a bare artifact.
    ``ProtocolError`` for a value nested deeper than ``MAX_JSON_DEPTH``."""
    check_depth(value.artifact if isinstance(value, TaskResult) else value, "result")
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
    """Run ``produce`` and turn anything it returns or raises into a valid result that
    fits in one message (``fit_result``)."""
    try:
        return fit_result(coerce_result(envelope, produce()))
    except ProtocolError as exc:
        return failed(envelope, f"the executor returned an invalid result: {exc}")
    except RecursionError:
        return failed(envelope, "the executor returned a result nested too deeply")
    except Exception as exc:  # an executor bug must not crash the follower
        return failed(envelope, f"{type(exc).__name__}: {exc}")


def fit_result(result: TaskResult) -> TaskResult:
    """``result``, or — when it is over ``MAX_RESULT_BYTES`` and could not travel to the
    leader in one message — a failed result of the same attempt saying how large it
    was, with the spend it reported (what was spent is spent)."""
    size = json_size(to_dict(result))
    if size <= MAX_RESULT_BYTES:
        return result
    why = too_large("the result", size)
    return TaskResult(
        task_id=result.task_id,
        idempotency_key=result.idempotency_key,
        epoch=result.epoch,
        status="failed",
        notes=Notes(uncertain=[why]),
        evidence=[CommandEvidence(command="(executor)", exit_code=1, output=why)],
        usage=result.usage,
    )


def too_large(what: str, size: int) -> str:
    """Why an output cannot be a result: ``stdout was 20.0 MiB (20,971,520 bytes); ...``."""
    return (
        f"{what} was {human(size)} ({size:,} bytes); the limit is {human(MAX_RESULT_BYTES)} "
        f"({MAX_RESULT_BYTES:,} bytes): put large output in a file and return its path"
    )


def _clip(text: str) -> str:
    if len(text) <= REASON_LIMIT:
        return text
    half = REASON_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - REASON_LIMIT:,} characters cut ...]\n{text[-half:]}"


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
