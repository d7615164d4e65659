"""Deterministic executors for tests, demos and benchmarks (they are product, not mocks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tenure.executors.base import TaskContext, coerce_result, failed
from tenure.protocol import TaskEnvelope, TaskResult


class NoopExecutor:
    """Completes at once with a tiny artifact: the unit of throughput benchmarks."""

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        return coerce_result(envelope, {"status": "completed", "artifact": {"ok": True}})


class SleepExecutor:
    """Takes a fixed time, checking in halfway; stands in for a slow agent. A cancelled
    attempt (``ctx.cancelled``) stops sleeping at once and fails."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        if ctx.cancelled.wait(self.seconds / 2):
            return failed(envelope, "cancelled while sleeping")
        ctx.progress("halfway", 0.5)
        if ctx.cancelled.wait(self.seconds / 2):
            return failed(envelope, "cancelled while sleeping")
        return coerce_result(envelope, {"status": "completed", "artifact": {"slept": self.seconds}})


class ScriptedExecutor:
    """Plays back one step per attempt of each task: an artifact, a result-shaped
    dict (``{"status": ...}``) or an exception to raise. The last step repeats."""

    def __init__(self, script: Mapping[str, Sequence[Any]], default: Any = None) -> None:
        self.script = {task: list(steps) for task, steps in script.items()}
        self.default = default

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        steps = self.script.get(envelope.task_id)
        if not steps:
            if self.default is None:
                return failed(envelope, f"no scripted step for task {envelope.task_id!r}")
            return coerce_result(envelope, self.default)
        step = steps[min(envelope.attempt, len(steps)) - 1]
        if isinstance(step, BaseException):
            raise step
        return coerce_result(envelope, step)
