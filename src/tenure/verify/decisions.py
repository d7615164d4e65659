"""The decision log's records: candidates, decisions and the events they become.

A *candidate* is one answer in a disagreement (a worker's result, a replica's
vote, a check's finding) with what we know about where it came from. A
*decision* is what a tie-break policy made of the candidates: a winner, an
escalation to a person, or neither, always with a reason. Both become events
that hold their inputs by reference (an idempotency key, a check name), not by
copy, so the log stays small and every entry can be traced to the register.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenure.protocol import SourceEvidence, TaskResult
from tenure.protocol.clip import clip
from tenure.verify.checks import Verdict

DECISION_EVENT = "decision"
VERDICT_EVENT = "verify.verdict"
PREVIEW = 120


@dataclass(frozen=True)
class Candidate:
    """One answer and its provenance.

    ``ref`` names where it can be found (``task:attempt-n`` or ``check:command``);
    ``roles`` are what its author is (a member's capabilities, ``verifier`` for a
    check); ``model`` is ``provider:name`` when a model produced it.
    """

    ref: str
    answer: Any
    member: str | None = None
    model: str | None = None
    roles: tuple[str, ...] = ()
    confidence: float | None = None
    grounded_at: datetime | None = None

    @property
    def provider(self) -> str | None:
        if not self.model or ":" not in self.model:
            return None
        return self.model.split(":", 1)[0]

    @classmethod
    def from_result(
        cls,
        result: TaskResult,
        *,
        member: str | None = None,
        roles: tuple[str, ...] = (),
        ref: str | None = None,
    ) -> Candidate:
        """A worker's completed result as a candidate: artifact, confidence, freshest input."""
        return cls(
            ref=ref or result.idempotency_key,
            answer=result.artifact,
            member=member,
            model=result.usage.model if result.usage is not None else None,
            roles=roles,
            confidence=result.confidence,
            grounded_at=grounded_at(result),
        )

    def brief(self) -> dict[str, Any]:
        """The candidate as a log entry: its reference and a short preview, never the whole."""
        out: dict[str, Any] = {"ref": self.ref, "answer": preview(self.answer)}
        for key in ("member", "model", "confidence"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.roles:
            out["roles"] = list(self.roles)
        if self.grounded_at is not None:
            out["grounded_at"] = self.grounded_at.isoformat()
        return out


def grounded_at(result: TaskResult) -> datetime | None:
    """The time of the freshest input the answer rests on (grounding, else sources)."""
    times = [g.at for g in result.grounding]
    if not times:
        times = [e.retrieved_at for e in result.evidence if isinstance(e, SourceEvidence)]
    if not times:
        return None
    return max(t if t.tzinfo else t.replace(tzinfo=UTC) for t in times)


@dataclass(frozen=True)
class Decision:
    """What a policy made of a disagreement.

    ``winner`` is the winning candidate's ``ref`` (None when undecided);
    ``escalate`` sends the decision to a person; ``abstained`` means the policy
    could not or would not decide (no calibrated confidence, no grounding...);
    ``steps`` are the decisions of a chain's policies, in order.
    """

    policy: str
    winner: str | None
    reason: str
    escalate: bool = False
    abstained: bool = False
    warnings: tuple[str, ...] = ()
    steps: tuple[Decision, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        if self.escalate:
            return "escalated"
        if self.winner is not None:
            return "winner"
        return "abstained" if self.abstained else "undecided"


def decision_event(
    decision: Decision,
    *,
    task_id: str,
    decision_type: str,
    candidates: list[Candidate],
    **extra: Any,
) -> dict[str, Any]:
    """A decision as the payload of a ``decision`` event."""
    payload: dict[str, Any] = {
        "task_id": task_id,
        "decision": decision_type,
        "policy": decision.policy,
        "inputs": [c.brief() for c in candidates],
        "outcome": decision.outcome,
        "winner": decision.winner,
        "reason": clip(decision.reason, 500),
        "warnings": list(decision.warnings),
        **extra,
    }
    if decision.steps:
        payload["steps"] = [
            {
                "policy": s.policy,
                "outcome": s.outcome,
                "winner": s.winner,
                "reason": clip(s.reason, 300),
            }
            for s in decision.steps
        ]
    if decision.details:
        payload["details"] = decision.details
    return payload


def verdict_event(verdict: Verdict, *, task_id: str, key: str, **extra: Any) -> dict[str, Any]:
    """A check's verdict as the payload of a ``verify.verdict`` event."""
    payload: dict[str, Any] = {
        "task_id": task_id,
        "key": key,
        "check": verdict.check,
        "passed": verdict.passed,
        "reason": clip(verdict.reason, 500),
        "inputs": [key],
        **extra,
    }
    seen = {k: v for k, v in verdict.evidence.items() if k != "output"}
    if seen:
        payload["evidence"] = _small(seen)
    warnings = verdict.evidence.get("warnings")
    if warnings:
        payload["warnings"] = list(warnings)
    return payload


def preview(value: Any, limit: int = PREVIEW) -> str:
    """A one-line, bounded rendering of an answer for people reading the log."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return clip(text, limit)


def _small(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, str | int | float | bool) or item is None:
            out[key] = item if not isinstance(item, str) else item[:300]
        else:
            out[key] = preview(item, 300)
    return out
