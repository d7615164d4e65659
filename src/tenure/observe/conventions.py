"""The spans of a team's work, named and attributed after the OpenTelemetry GenAI
semantic conventions (agent and model spans) where they apply.

- ``invoke_workflow {team}``: a run of a team, one per leader's term
  (``gen_ai.operation.name`` ``invoke_workflow``, ``gen_ai.workflow.name``);
- ``invoke_agent {member}``: one attempt of a task by a member (``invoke_agent``,
  ``gen_ai.agent.name``/``id``; ``tenure.task.id``, ``tenure.attempt``,
  ``tenure.epoch``, ``tenure.idempotency_key``, ``tenure.result.status``);
- ``chat {model}``: one model call (``chat``, ``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` and
  ``output_tokens``, ``gen_ai.response.finish_reasons``; ``tenure.cost_usd``);
- ``verify {task}``: the leader's ladder on one result, and ``check {kind}`` per rung
  (``tenure.check.kind``, ``tenure.verdict.passed``, ``tenure.verdict.reason``).

No prompt or answer text is recorded (the conventions make content opt-in).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tenure.observe.spans import Span, span
from tenure.observe.types import Attributes
from tenure.protocol import TaskEnvelope

OPERATION = "gen_ai.operation.name"


@contextmanager
def run(team: str, *, mode: str | None = None) -> Iterator[Span]:
    """A run of ``team``'s plan: a leader's term, or a queue run's producer (``mode``
    ``queue``). The envelopes sent inside it carry it to the members that do the work."""
    attributes: Attributes = {
        OPERATION: "invoke_workflow",
        "gen_ai.workflow.name": team,
        "tenure.team": team,
        "tenure.mode": mode,
    }
    with span(f"invoke_workflow {team}", attributes) as opened:
        yield opened


@contextmanager
def invoke_agent(team: str, member: str, env: TaskEnvelope) -> Iterator[Span]:
    """One attempt (``env``) run by ``member``."""
    attributes: Attributes = {
        OPERATION: "invoke_agent",
        "gen_ai.agent.name": member,
        "gen_ai.agent.id": f"{team}/{member}",
        "tenure.team": team,
        "tenure.task.id": env.task_id,
        "tenure.attempt": env.attempt,
        "tenure.epoch": env.epoch,
        "tenure.idempotency_key": env.idempotency_key,
    }
    with span(f"invoke_agent {member}", attributes) as opened:
        yield opened


@contextmanager
def chat(provider: str, model: str, *, max_tokens: int | None = None) -> Iterator[Span]:
    """One call of ``model``; the caller sets the usage (``usage``) when it answers."""
    attributes: Attributes = {
        OPERATION: "chat",
        "gen_ai.provider.name": provider or None,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
    }
    with span(f"chat {model}", attributes, kind="client") as opened:
        yield opened


def usage(
    opened: Span,
    *,
    input_tokens: int,
    output_tokens: int,
    model: str = "",
    finish_reason: str = "",
    cost_usd: float = 0.0,
) -> None:
    """What a model call cost, on its ``chat`` span."""
    opened.set("gen_ai.usage.input_tokens", input_tokens)
    opened.set("gen_ai.usage.output_tokens", output_tokens)
    opened.set("gen_ai.response.model", model or None)
    opened.set("gen_ai.response.finish_reasons", [finish_reason] if finish_reason else None)
    opened.set("tenure.cost_usd", cost_usd)


@contextmanager
def verify(team: str, task_id: str, *, attempt: int, epoch: int, key: str) -> Iterator[Span]:
    """The leader's verification of one result."""
    attributes: Attributes = {
        "tenure.team": team,
        "tenure.task.id": task_id,
        "tenure.attempt": attempt,
        "tenure.epoch": epoch,
        "tenure.idempotency_key": key,
    }
    with span(f"verify {task_id}", attributes) as opened:
        yield opened


@contextmanager
def check(kind: str) -> Iterator[Span]:
    """One rung of the ladder; the caller sets the verdict (``verdict``)."""
    with span(f"check {kind}", {"tenure.check.kind": kind}) as opened:
        yield opened


def verdict(opened: Span, passed: bool, reason: str) -> None:
    """A check's verdict on its span (a failed check is not an error of the span)."""
    opened.set("tenure.verdict.passed", passed)
    opened.set("tenure.verdict.reason", reason)
