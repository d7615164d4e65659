"""Policies that decide by a signal the answers carry: confidence, grounding time, role.

None of them asks anyone; each abstains, with the reason, when the signal is
missing or too weak to separate the answers.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tenure.protocol.policy import AuthorityParams, ConfidenceParams, FreshestParams
from tenure.verify.checks import CLOCK_SKEW_SECONDS
from tenure.verify.decisions import Candidate, Decision
from tenure.verify.policy_base import DecisionContext, Policy


class ConfidencePolicy(Policy):
    """The most confident answer wins, only if its confidence is calibrated."""

    name = "confidence"

    def __init__(self, params: ConfidenceParams | None = None) -> None:
        self.config = params or ConfidenceParams()

    def params(self) -> dict[str, Any]:
        return self.config.model_dump()

    def describe(self) -> str:
        c = self.config
        if not c.calibrated:
            return (
                f"confidence ({c.source}): REFUSES to run — the source is not declared calibrated"
            )
        return (
            f"confidence ({c.source}, declared calibrated): the most confident answer wins "
            f"by more than {c.margin:g}"
        )

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        c = self.config
        if not c.calibrated:
            return self._abstain(
                f"refused: the confidence source ({c.source}) is not declared calibrated, "
                "and uncalibrated confidence says little about correctness"
            )
        answers = self._answers(candidates, context)
        missing = [g[0].ref for g in answers if all(x.confidence is None for x in g)]
        if missing:
            return self._abstain(f"no confidence reported by {', '.join(missing)}")
        ranked = sorted(
            ((max(x.confidence or 0.0 for x in g), g) for g in answers),
            key=lambda pair: pair[0],
            reverse=True,
        )
        best, top = ranked[0]
        if len(ranked) > 1 and best - ranked[1][0] <= c.margin:
            return Decision(
                self.name,
                None,
                f"too close: {best:.2f} vs {ranked[1][0]:.2f} (margin {c.margin:g})",
            )
        winner = max(top, key=lambda x: x.confidence or 0.0)
        runner = f" over {ranked[1][0]:.2f}" if len(ranked) > 1 else ""
        return self._win(winner, f"{winner.ref} is the most confident: {best:.2f}{runner}")


class FreshestPolicy(Policy):
    """The answer grounded in the most recent input (tool output, source) wins."""

    name = "freshest"

    def __init__(self, params: FreshestParams | None = None) -> None:
        self.config = params or FreshestParams()

    def params(self) -> dict[str, Any]:
        return self.config.model_dump()

    def describe(self) -> str:
        gap = self.config.min_gap_seconds
        return f"freshest: the answer grounded in the newest input wins (by more than {gap:g}s)"

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        latest = datetime.now(UTC) + timedelta(seconds=CLOCK_SKEW_SECONDS)
        dated = []
        future: list[str] = []  # a time in the future is no proof of freshness
        for answer in self._answers(candidates, context):
            times = []
            for c in answer:
                if c.grounded_at is not None and c.grounded_at > latest:
                    future.append(c.ref)
                elif c.grounded_at is not None:
                    times.append((c.grounded_at, c))
            if times:
                dated.append(max(times, key=lambda pair: pair[0]))
        ignored = (
            f" (grounding dated in the future ignored: {', '.join(future)})" if future else ""
        )
        if not dated:
            return self._abstain(
                f"no answer says when the inputs it rests on were read{ignored}"
            )
        dated.sort(key=lambda pair: pair[0], reverse=True)
        newest, winner = dated[0]
        if len(dated) > 1:
            gap = (newest - dated[1][0]).total_seconds()
            if gap <= self.config.min_gap_seconds:
                return Decision(
                    self.name,
                    None,
                    f"as fresh as each other ({gap:g}s apart) — no winner{ignored}",
                )
            older = f", {gap:.0f}s newer than {dated[1][1].ref}"
        else:
            older = "; the others give no grounding time"
        return self._win(
            winner, f"{winner.ref} rests on input read at {newest.isoformat()}{older}{ignored}"
        )


class AuthorityPolicy(Policy):
    """A role decided at design time wins (the test runner beats the coder's report)."""

    name = "authority"

    def __init__(self, params: AuthorityParams) -> None:
        self.config = params

    def params(self) -> dict[str, Any]:
        return self.config.model_dump()

    def describe(self) -> str:
        return f"authority: the answer of the strongest role wins ({' > '.join(self.config.roles)})"

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        answers = self._answers(candidates, context)
        for role in self.config.roles:
            backed = [g for g in answers if any(role in c.roles for c in g)]
            if len(backed) == 1:
                winner = next(c for c in backed[0] if role in c.roles)
                return self._win(winner, f"{winner.ref} has the deciding role {role!r}")
            if len(backed) > 1:
                refs = ", ".join(next(c for c in g if role in c.roles).ref for g in backed)
                return Decision(
                    self.name, None, f"the role {role!r} backs different answers ({refs})"
                )
        return self._abstain(
            f"no answer comes from a deciding role ({', '.join(self.config.roles)})"
        )
