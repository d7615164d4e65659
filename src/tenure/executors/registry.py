"""Executors named by a short spec, so plans and the CLI can choose one by string.

``noop`` · ``sleep:SECONDS`` · ``command:CMDLINE`` · ``python:MODULE:ATTR`` where
ATTR is a function ``fn(envelope, ctx)``, an object with ``execute``, or a
zero-argument factory returning one · ``llm`` (the model ``TENURE_MODEL`` names)
or ``llm:PROVIDER:MODEL[@BASE_URL]`` · ``a2a:URL`` (a remote A2A agent).
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
from typing import Any, cast

from tenure.executors.base import Executor
from tenure.executors.command import CommandExecutor
from tenure.executors.python import PythonExecutor
from tenure.executors.scripted import NoopExecutor, SleepExecutor
from tenure.protocol import ProtocolError

SPEC_HELP = (
    "noop, sleep:SECONDS, command:CMDLINE, python:MODULE:ATTR, llm[:PROVIDER:MODEL] or a2a:URL"
)


def resolve_executor(spec: str, *, field: str = "executor") -> Executor:
    kind, _, rest = spec.partition(":")
    if kind == "noop" and not rest:
        return NoopExecutor()
    if kind == "sleep":
        try:
            seconds = float(rest)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds < 0:
            raise ProtocolError(field, f"sleep:SECONDS with a number >= 0, got {spec!r}")
        return SleepExecutor(seconds)
    if kind == "command" and rest.strip():
        try:
            return CommandExecutor(rest)
        except ValueError as exc:  # shlex: unbalanced quotes
            raise ProtocolError(field, f"command:CMDLINE ({exc}); got {spec!r}") from None
    if kind == "python" and rest:
        return _python(rest, spec, field)
    if kind == "llm":
        from tenure.executors.llm import LLMExecutor  # imports the model layer only when used

        return LLMExecutor.from_spec(rest)
    if kind == "a2a" and rest:
        from tenure.executors.a2a import ENV_REMOTE_TOKEN, A2AExecutor  # the SDK, only now

        return A2AExecutor(rest, token=os.environ.get(ENV_REMOTE_TOKEN) or None)
    raise ProtocolError(field, f"one of {SPEC_HELP}; got {spec!r}")


def _python(target: str, spec: str, field: str) -> Executor:
    module_name, _, attr = target.partition(":")
    if not attr:
        raise ProtocolError(field, f"python:MODULE:ATTR, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProtocolError(field, f"an importable module; {module_name!r}: {exc}") from None
    try:
        obj: Any = getattr(module, attr)
    except AttributeError:
        raise ProtocolError(field, f"{module_name} has no attribute {attr!r}") from None
    if hasattr(obj, "execute"):
        return cast(Executor, obj)
    if callable(obj) and _arity(obj) == 0:
        made = obj()
        if hasattr(made, "execute"):
            return cast(Executor, made)
    if callable(obj):
        return PythonExecutor(obj)
    raise ProtocolError(field, f"{spec!r} is not a function or an executor")


def _arity(obj: Any) -> int:
    try:
        return len(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return -1
