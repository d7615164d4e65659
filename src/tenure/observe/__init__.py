"""Traces of a team's work: OpenTelemetry spans when asked for, nothing otherwise.

The roles, executors, models and checks open their spans through this package only
(``run``, ``invoke_agent``, ``chat``, ``verify``, ``check``), named and attributed
after the OpenTelemetry GenAI semantic conventions where those apply, with Tenure's
own facts (team, task, attempt, epoch, verdict) as ``tenure.*`` attributes. It sits
just above ``protocol`` so any layer may call it.

Tracing is on when OpenTelemetry is installed (``pip install 'tenure[otel]'``) and
the environment asks for it: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, or ``TENURE_OTEL=1``;
``TENURE_OTEL=0`` or ``OTEL_SDK_DISABLED=true`` turn it off. The exporter is the
SDK's OTLP/HTTP one, configured by the standard ``OTEL_*`` variables. A program
that set up its own tracer provider keeps it; ``install`` hands one over directly
(tests use an in-memory exporter). Otherwise every span is a shared no-op and
``opentelemetry`` is never imported.

A team's members are processes of their own, so a run's trace crosses them in its
messages: ``traceparent`` is the span open here as a W3C ``traceparent``, which an
envelope carries, and ``parented`` makes the receiving member's spans its children.
"""

from tenure.observe.conventions import chat, check, invoke_agent, run, usage, verdict, verify
from tenure.observe.spans import (
    NOOP,
    Span,
    carried,
    enabled,
    install,
    parented,
    span,
    traceparent,
)

__all__ = [
    "NOOP",
    "Span",
    "carried",
    "chat",
    "check",
    "enabled",
    "install",
    "invoke_agent",
    "parented",
    "run",
    "span",
    "traceparent",
    "usage",
    "verdict",
    "verify",
]
