"""The facade every span goes through: a no-op unless tracing was asked for.

Deciding is done once, on the first span: ``enabled`` reads the environment (see the
package's docstring) and only then imports ``tenure.observe.otel``, which imports
OpenTelemetry. Asked for without OpenTelemetry installed, it logs one warning with
the install hint and stays off.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from tenure.observe.types import Attributes, Kind, Value

__all__ = [
    "NOOP",
    "Attributes",
    "Span",
    "carried",
    "enabled",
    "install",
    "parented",
    "span",
    "traceparent",
]

ENV_SWITCH = "TENURE_OTEL"
ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_ON, _OFF = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
log = logging.getLogger("tenure.observe")
T = TypeVar("T")


class Span(Protocol):
    """What a caller may do with an open span."""

    def set(self, key: str, value: Value | None) -> None:
        """Set an attribute (None is left out; text is redacted)."""

    def fail(self, error_type: str, message: str = "") -> None:
        """Mark the span as an error of ``error_type`` (``error.type``)."""


class _Noop:
    def set(self, key: str, value: Value | None) -> None:
        return None

    def fail(self, error_type: str, message: str = "") -> None:
        return None


NOOP: Span = _Noop()
"""The span of every call while tracing is off."""


class _State:
    lock = threading.Lock()
    decided = False
    backend: Any = None  # tenure.observe.otel.Backend, once tracing is on


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    switch = env.get(ENV_SWITCH, "").strip().lower()
    if switch in _OFF:
        return False
    return switch in _ON or any(env.get(name) for name in ENDPOINTS)


def _backend() -> Any:
    if _State.decided:
        return _State.backend
    with _State.lock:
        if not _State.decided:
            _State.backend = _from_environment() if wanted(os.environ) else None
            _State.decided = True
    return _State.backend


def _from_environment() -> Any:
    try:
        from tenure.observe import otel
    except ImportError:
        log.warning(
            "traces were asked for (%s or an OTLP endpoint) but OpenTelemetry is not "
            "installed: pip install 'tenure[otel]'",
            ENV_SWITCH,
        )
        return None
    return otel.Backend.from_environment()


def enabled() -> bool:
    """True when spans are recorded."""
    return _backend() is not None


def install(provider: Any | None) -> None:
    """Record tenure's spans with this OpenTelemetry ``TracerProvider`` (None: decide
    from the environment again, on the next span)."""
    with _State.lock:
        if provider is None:
            _State.backend, _State.decided = None, False
            return
        from tenure.observe import otel

        _State.backend, _State.decided = otel.Backend(provider), True


@contextmanager
def span(
    name: str, attributes: Attributes | None = None, *, kind: Kind = "internal"
) -> Iterator[Span]:
    """A span around the block, the current one's child (an exception in the block
    marks it as an error and goes on)."""
    backend = _backend()
    if backend is None:
        yield NOOP
        return
    with backend.span(name, attributes or {}, kind) as opened:
        yield opened


def traceparent() -> str | None:
    """The span open here as a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``),
    for a message to carry to another process; None while tracing is off or outside
    any span."""
    backend = _backend()
    return None if backend is None else backend.traceparent()


@contextmanager
def parented(traceparent: str | None) -> Iterator[None]:
    """Spans opened in the block are children of the span ``traceparent`` names (a span
    of another process: the one that sent the message); without one, of the span open
    here, as always. Parenting is all it is used for."""
    backend = _backend()
    if backend is None or not traceparent:
        yield
        return
    with backend.parented(traceparent):
        yield


def carried(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` bound to the current context, to run on another thread: the spans it
    opens are children of the span open here (threads do not inherit it)."""
    return functools.partial(contextvars.copy_context().run, fn)
