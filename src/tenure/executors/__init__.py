"""Doing the work: Python callables, shell commands, scripted doubles."""

from tenure.executors.base import (
    Executor,
    RefusedExecutor,
    TaskContext,
    UnknownExecutor,
    coerce_result,
    failed,
    fit_result,
    make_result,
    safe_result,
)
from tenure.executors.command import CommandExecutor
from tenure.executors.python import PythonExecutor
from tenure.executors.registry import SPEC_HELP, resolve_executor
from tenure.executors.scripted import NoopExecutor, ScriptedExecutor, SleepExecutor

__all__ = [
    "SPEC_HELP",
    "CommandExecutor",
    "Executor",
    "NoopExecutor",
    "PythonExecutor",
    "ScriptedExecutor",
    "SleepExecutor",
    "RefusedExecutor",
    "TaskContext",
    "UnknownExecutor",
    "coerce_result",
    "failed",
    "fit_result",
    "make_result",
    "resolve_executor",
    "safe_result",
]
