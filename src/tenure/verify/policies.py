"""Named tie-break policies: who wins when two answers disagree, decided at design time.

Each policy is a small object with a ``name``, its parameters, a plain-words
``describe()`` and ``decide(candidates, context) -> Decision``. None of them
guesses: a policy that cannot decide says so (``abstained`` or undecided, with
the reason), and only ``human`` escalates. A ``Chain`` consults its policies in
order and escalates to a person when two of them pick different answers.

Policies compare *answers*, not candidates: candidates whose answers agree
(by the decision's comparator) are one answer with several backers.

``build_policy`` makes a policy from a plan spec (see ``tenure.protocol.policy``);
``policy_for`` finds the one a plan names for a decision type.

This module holds the chain and the builder; the base class is in ``policy_base``,
the policies in ``policy_signals`` (confidence, freshest, authority) and
``policy_deciders`` (judge, quorum, human). Every name is re-exported here.
"""

from __future__ import annotations

from typing import Any

from tenure.protocol.policy import (
    AnySpec,
    AuthorityParams,
    ChainSpec,
    ConfidenceParams,
    FreshestParams,
    HumanParams,
    JudgeParams,
    PolicySpec,
    QuorumParams,
    parse_policy,
    policy_spec_for,
)
from tenure.verify.decisions import Candidate, Decision, preview
from tenure.verify.policy_base import DecisionContext, Policy
from tenure.verify.policy_deciders import HumanPolicy, JudgePolicy, QuorumPolicy
from tenure.verify.policy_signals import AuthorityPolicy, ConfidencePolicy, FreshestPolicy

__all__ = [
    "AuthorityPolicy",
    "Chain",
    "ConfidencePolicy",
    "DecisionContext",
    "FreshestPolicy",
    "HumanPolicy",
    "JudgePolicy",
    "Policy",
    "QuorumPolicy",
    "build_policy",
    "describe_policies",
    "policy_for",
]


class Chain(Policy):
    """Policies consulted in order. Their winners must agree; if two policies pick
    different answers, or none decides, the decision goes to a person (``human``
    may end the chain to say so explicitly)."""

    name = "chain"

    def __init__(self, steps: list[Policy]) -> None:
        if not steps:
            raise ValueError("a chain needs at least one policy")
        self.steps = steps

    def params(self) -> dict[str, Any]:
        return {"steps": [s.name for s in self.steps]}

    def describe(self) -> str:
        inner = " -> ".join(s.name for s in self.steps)
        return f"chain ({inner}): every policy is consulted; disagreement goes to a person"

    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        key = context.compare_key()
        by_ref = {c.ref: c for c in candidates}
        steps: list[Decision] = []
        warnings: list[str] = []
        chosen: dict[str, Decision] = {}  # answer key -> first step that chose it
        for policy in self.steps:
            if isinstance(policy, HumanPolicy):
                if chosen:
                    break  # decided before a person was needed
                step = policy.decide(candidates, context)
                steps.append(step)
                return Decision(
                    self.name,
                    None,
                    f"no policy decided; {step.reason}",
                    escalate=True,
                    warnings=tuple(warnings),
                    steps=tuple(steps),
                )
            step = policy.decide(candidates, context)
            steps.append(step)
            warnings.extend(w for w in step.warnings if w not in warnings)
            if step.winner is not None:
                chosen.setdefault(key(by_ref[step.winner].answer), step)
        if len(chosen) > 1:
            picks = "; ".join(
                f"{d.policy} picks {d.winner} = {preview(by_ref[d.winner or ''].answer, 60)}"
                for d in chosen.values()
            )
            return Decision(
                self.name,
                None,
                f"the policies disagree ({picks}): a person decides",
                escalate=True,
                warnings=tuple(warnings),
                steps=tuple(steps),
            )
        if chosen:
            first = next(iter(chosen.values()))
            agree = [d.policy for d in steps if d.winner is not None and d is not first]
            also = f"; {', '.join(agree)} agree" if agree else ""
            return Decision(
                self.name,
                first.winner,
                f"{first.policy}: {first.reason}{also}",
                warnings=tuple(warnings),
                steps=tuple(steps),
            )
        return Decision(
            self.name,
            None,
            "no policy in the chain decided: a person decides",
            escalate=True,
            warnings=tuple(warnings),
            steps=tuple(steps),
        )


def build_policy(spec: AnySpec | Any) -> Policy:
    """A policy object from a (parsed or as-written) plan spec."""
    if not isinstance(spec, PolicySpec | ChainSpec):
        spec = parse_policy(spec)
    if isinstance(spec, ChainSpec):
        return Chain([build_policy(step) for step in spec.steps])
    p = spec.params
    if spec.name == "confidence":
        return ConfidencePolicy(ConfidenceParams.model_validate(p))
    if spec.name == "judge":
        return JudgePolicy(JudgeParams.model_validate(p))
    if spec.name == "freshest":
        return FreshestPolicy(FreshestParams.model_validate(p))
    if spec.name == "authority":
        return AuthorityPolicy(AuthorityParams.model_validate(p))
    if spec.name == "quorum":
        return QuorumPolicy(QuorumParams.model_validate(p))
    if spec.name == "human":
        return HumanPolicy(HumanParams.model_validate(p))
    raise ValueError(f"unknown policy {spec.name!r}")


def policy_for(
    policies: dict[str, Any], decision: str | None, task_id: str | None = None
) -> tuple[str, Policy] | None:
    """The decision type a plan's ``policies`` settles ``decision`` under, and its policy."""
    found = policy_spec_for(policies, decision, task_id)
    if found is None:
        return None
    name, spec = found
    return name, build_policy(spec)


def describe_policies(policies: dict[str, Any]) -> dict[str, str]:
    """Every configured decision type and its policy, in plain words (for people)."""
    return {
        name: build_policy(parse_policy(spec, name)).describe() for name, spec in policies.items()
    }
