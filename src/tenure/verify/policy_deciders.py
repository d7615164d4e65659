"""Policies that hand the decision to someone: a judge model, the voters, the operator.

Only ``human`` escalates; a judge that flips with the order of the answers, or
voters without ``k`` in agreement, leave the decision undecided, never guessed.
"""

from __future__ import annotations

from typing import Any

from tenure.protocol import TenureError
from tenure.protocol.policy import HumanParams, JudgeParams, QuorumParams
from tenure.verify.decisions import Candidate, Decision, preview
from tenure.verify.judge import JudgeError, compare
from tenure.verify.policy_base import DecisionContext, Policy
from tenure.verify.quorum import majority


class JudgePolicy(Policy):
    """A judge model compares the answers pairwise, in both orders; a flip is a tie."""

    name = "judge"

    def __init__(self, params: JudgeParams | None = None) -> None:
        self.config = params or JudgeParams()

    def params(self) -> dict[str, Any]:
        return self.config.model_dump()

    def describe(self) -> str:
        who = self.config.model or "the default judge model"
        return (
            f"judge ({who}): compares the answers against the criteria in both orders; "
            "the one preferred both times wins, an order-dependent preference is a tie"
        )

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        answers = self._answers(candidates, context)
        if len(answers) == 1:
            return self._win(answers[0][0], "every answer agrees")
        try:
            model = context.trust.model(self.config.model)
        except TenureError as exc:
            return self._abstain(f"no judge: {exc}")
        reps = [g[0] for g in answers]
        beaten: dict[str, int] = {c.ref: 0 for c in reps}
        pairs: list[str] = []
        for i, a in enumerate(reps):
            for b in reps[i + 1 :]:
                try:
                    pref = compare(model, context.criteria, a.answer, b.answer)
                except JudgeError as exc:
                    return self._abstain(f"judge failed comparing {a.ref} and {b.ref}: {exc}")
                if pref.winner == "a":
                    beaten[a.ref] += 1
                elif pref.winner == "b":
                    beaten[b.ref] += 1
                pairs.append(f"{a.ref} vs {b.ref}: {pref.reason}")
        needed = len(reps) - 1
        winners = [c for c in reps if beaten[c.ref] == needed]
        detail = "; ".join(pairs)
        if len(winners) == 1:
            return self._win(winners[0], f"judged best against every other answer ({detail})")
        return Decision(self.name, None, f"no answer beat every other: {detail}")


class QuorumPolicy(Policy):
    """``k`` agreeing voters decide; voters sharing a model or provider are warned about."""

    name = "quorum"

    def __init__(self, params: QuorumParams) -> None:
        self.config = params

    def params(self) -> dict[str, Any]:
        return self.config.model_dump()

    def describe(self) -> str:
        return (
            f"quorum: an answer backed by {self.config.k} or more voters wins "
            f"({self.config.comparator} comparison); warns when voters share a model or provider"
        )

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        try:
            key = context.trust.comparator(self.config.comparator)
        except TenureError as exc:
            return self._abstain(str(exc))
        return majority(candidates, self.config.k, key, policy=self.name)


class HumanPolicy(Policy):
    """Stop and ask the operator: the decision goes to the inbox."""

    name = "human"

    def __init__(self, params: HumanParams | None = None) -> None:
        self.config = params or HumanParams()

    def params(self) -> dict[str, Any]:
        return self.config.model_dump()

    def describe(self) -> str:
        return "human: the operator decides (the task waits in the inbox)"

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        answers = ", ".join(f"{c.ref} = {preview(c.answer, 60)}" for c in candidates)
        ask = self.config.question or f"which {context.decision} answer is right?"
        return Decision(self.name, None, f"{ask} ({answers})", escalate=True)
