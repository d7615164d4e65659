"""The OpenTelemetry side of ``tenure.observe``: imported only when tracing is on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tenure.observe.types import Attributes, Kind, Value
from tenure.protocol.secrets import redact_text

TEXT_LIMIT = 1000
TRACEPARENT = "traceparent"
_W3C = TraceContextTextMapPropagator()  # W3C Trace Context, whatever the global propagator
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


def _version() -> str:
    try:
        return version("tenure")
    except PackageNotFoundError:
        return "0"


def clean(value: Value) -> Any:
    """An attribute value as exported: text redacted and cut, sequences as tuples."""
    if isinstance(value, str):
        return redact_text(value)[:TEXT_LIMIT]
    if isinstance(value, list | tuple):
        return tuple(redact_text(str(v))[:TEXT_LIMIT] for v in value)
    return value


class OtelSpan:
    def __init__(self, inner: trace.Span) -> None:
        self.inner = inner

    def set(self, key: str, value: Value | None) -> None:
        if value is not None:
            self.inner.set_attribute(key, clean(value))

    def fail(self, error_type: str, message: str = "") -> None:
        self.inner.set_attribute("error.type", error_type)
        self.inner.set_status(Status(StatusCode.ERROR, redact_text(message)[:TEXT_LIMIT]))


class Backend:
    """Spans on a tracer of ``provider``."""

    def __init__(self, provider: Any) -> None:
        self.tracer = provider.get_tracer("tenure", _version())

    @classmethod
    def from_environment(cls) -> Backend:
        """The program's own tracer provider if it set one, else one exporting over
        OTLP/HTTP as the ``OTEL_*`` variables say (and made the global one)."""
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            return cls(current)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "tenure"}
        provider = TracerProvider(resource=Resource.create(named))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        return cls(provider)

    @contextmanager
    def span(self, name: str, attributes: Attributes, kind: Kind) -> Iterator[OtelSpan]:
        shown = {k: clean(v) for k, v in attributes.items() if v is not None}
        with self.tracer.start_as_current_span(
            name,
            kind=_KINDS[kind],
            attributes=shown,
            record_exception=False,  # its text unredacted: the status says it, redacted
            set_status_on_exception=False,
        ) as inner:
            opened = OtelSpan(inner)
            try:
                yield opened
            except BaseException as exc:
                opened.fail(type(exc).__qualname__, str(exc))
                raise

    def traceparent(self) -> str | None:
        """The current span as a W3C ``traceparent``; None outside any span."""
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        return carrier.get(TRACEPARENT)

    @contextmanager
    def parented(self, traceparent: str) -> Iterator[None]:
        """The remote span ``traceparent`` names made current: spans opened inside are
        its children (one that does not parse changes nothing)."""
        carried = _W3C.extract({TRACEPARENT: traceparent})
        if not trace.get_current_span(carried).get_span_context().is_valid:
            yield
            return
        token = context.attach(carried)
        try:
            yield
        finally:
            context.detach(token)
