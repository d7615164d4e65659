"""A Python callable as an executor: ``fn(envelope, ctx)`` returns a result or an artifact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenure.executors.base import TaskContext, safe_result
from tenure.protocol import TaskEnvelope, TaskResult

TaskFunction = Callable[[TaskEnvelope, TaskContext], Any]


class PythonExecutor:
    def __init__(self, fn: TaskFunction) -> None:
        self.fn = fn

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        return safe_result(envelope, lambda: self.fn(envelope, ctx))

    def __repr__(self) -> str:
        return f"PythonExecutor({getattr(self.fn, '__qualname__', self.fn)!r})"
