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
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from tenure.protocol import TenureError
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
from tenure.verify.judge import JudgeError, compare
from tenure.verify.quorum import Comparator, group, majority
from tenure.verify.trust import Trust


@dataclass
class DecisionContext:
    """What a policy may use besides the candidates."""

    decision: str = "default"
    criteria: list[str] = field(default_factory=list)
    comparator: str = "exact"
    trust: Trust = field(default_factory=Trust)

    def compare_key(self) -> Comparator:
        return self.trust.comparator(self.comparator)


class Policy(ABC):
    """A named, inspectable tie-break policy."""

    name: str = "policy"

    @abstractmethod
    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        """Pick a winner among ``candidates``, escalate, or say why it cannot."""

    @abstractmethod
    def describe(self) -> str:
        """What the policy does, in plain words, with its parameters."""

    def params(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params()})"

    # helpers shared by the policies

    def _answers(
        self, candidates: list[Candidate], context: DecisionContext
    ) -> list[list[Candidate]]:
        return group(candidates, context.compare_key())

    def _abstain(self, reason: str) -> Decision:
        return Decision(self.name, None, reason, abstained=True)

    def _win(self, candidate: Candidate, reason: str, **details: Any) -> Decision:
        return Decision(self.name, candidate.ref, reason, details=details)


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
        dated = []
        for answer in self._answers(candidates, context):
            times = [(c.grounded_at, c) for c in answer if c.grounded_at is not None]
            if times:
                dated.append(max(times, key=lambda pair: pair[0]))
        if not dated:
            return self._abstain("no answer says when the inputs it rests on were read")
        dated.sort(key=lambda pair: pair[0], reverse=True)
        newest, winner = dated[0]
        if len(dated) > 1:
            gap = (newest - dated[1][0]).total_seconds()
            if gap <= self.config.min_gap_seconds:
                return Decision(
                    self.name, None, f"as fresh as each other ({gap:g}s apart) — no winner"
                )
            older = f", {gap:.0f}s newer than {dated[1][1].ref}"
        else:
            older = "; the others give no grounding time"
        return self._win(winner, f"{winner.ref} rests on input read at {newest.isoformat()}{older}")


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
