"""Tie-break policy specs: how a plan names the policy that settles each kind of decision.

A plan's ``policies`` maps a *decision type* (``price``, ``completion``, ``safety``,
or ``default`` for every type not named) to one policy spec::

    policies:
      price: {chain: [freshest, {quorum: {k: 2}}, human]}
      completion: {authority: {roles: [tester, coder]}}
      default: human

A spec is a policy name, a one-key mapping ``{name: {parameters}}``, or a
``chain`` of those. This module only checks the shape (every problem is a
``ProtocolError`` naming the field, e.g. ``policies.price.chain[1].quorum.k``);
the policies themselves live in ``tenure.verify.policies``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from tenure.protocol.envelope import Strict
from tenure.protocol.errors import ProtocolError


class ConfidenceParams(Strict):
    """Highest confidence wins, but only from a source declared calibrated."""

    calibrated: bool = False
    source: str = Field(default="self-reported", min_length=1)
    margin: float = Field(default=0.0, ge=0, le=1)


class JudgeParams(Strict):
    """A model compares the answers pairwise, in both orders."""

    model: str | None = None


class FreshestParams(Strict):
    """The answer grounded in the most recent input wins."""

    min_gap_seconds: float = Field(default=0.0, ge=0)


class AuthorityParams(Strict):
    """Roles that decide, strongest first (``verifier`` is the leader's own checks)."""

    roles: list[str] = Field(min_length=1)


class QuorumParams(Strict):
    """``k`` voters agreeing decide; voters that share a model are flagged."""

    k: int = Field(ge=1)
    comparator: Literal["exact", "json"] = "exact"


class HumanParams(Strict):
    """Stop and ask the operator."""

    question: str | None = None


PARAMS: dict[str, type[Strict]] = {
    "confidence": ConfidenceParams,
    "judge": JudgeParams,
    "freshest": FreshestParams,
    "authority": AuthorityParams,
    "quorum": QuorumParams,
    "human": HumanParams,
}
POLICY_NAMES = tuple(PARAMS)
CHAIN = "chain"
DEFAULT_DECISION = "default"


class PolicySpec(Strict):
    """One named policy with its checked parameters."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class ChainSpec(Strict):
    """Policies tried in order; a disagreement between them goes to a person."""

    steps: list[PolicySpec]


AnySpec = PolicySpec | ChainSpec


def check_policies(value: Any) -> dict[str, Any]:
    """Refuse a malformed ``policies`` mapping (naming the field); return it unchanged."""
    if not isinstance(value, dict):
        raise ProtocolError("(policies)", "a mapping of decision type to policy")
    for decision, spec in value.items():
        if not isinstance(decision, str) or not decision.strip():
            raise ProtocolError(repr(decision), "a decision type name (a non-empty string)")
        parse_policy(spec, decision)
    return value


def parse_policy(spec: Any, where: str = "policy") -> AnySpec:
    """A policy spec as written in a plan -> ``PolicySpec`` or ``ChainSpec``."""
    if isinstance(spec, dict) and CHAIN in spec:
        if len(spec) != 1:
            others = ", ".join(sorted(str(k) for k in spec if k != CHAIN))
            raise ProtocolError(where, f"'chain' alone in its mapping; also found {others}")
        steps = spec[CHAIN]
        if not isinstance(steps, list) or not steps:
            raise ProtocolError(f"{where}.chain", "a non-empty list of policies")
        parsed: list[PolicySpec] = []
        for index, step in enumerate(steps):
            at = f"{where}.chain[{index}]"
            if isinstance(step, dict) and CHAIN in step:
                raise ProtocolError(at, "a policy; a chain inside a chain is not allowed")
            one = _single(step, at)
            if parsed and parsed[-1].name == "human":
                raise ProtocolError(at, "nothing after 'human': a person ends the chain")
            parsed.append(one)
        return ChainSpec(steps=parsed)
    return _single(spec, where)


def _single(spec: Any, where: str) -> PolicySpec:
    known = ", ".join(POLICY_NAMES)
    if isinstance(spec, str):
        name, raw = spec, None
    elif isinstance(spec, dict) and len(spec) == 1:
        name, raw = next(iter(spec.items()))
        where_name = f"{where}.{name}"
        if raw is not None and not isinstance(raw, dict):
            raise ProtocolError(where_name, f"a mapping of parameters or null; got {raw!r:.60}")
    else:
        raise ProtocolError(
            where, f"a policy name ({known}), {{name: {{parameters}}}} or {{chain: [...]}}"
        )
    if name not in PARAMS:
        raise ProtocolError(where, f"one of {known} (or chain); got {str(name)!r:.60}")
    try:
        params = PARAMS[name].model_validate(raw or {})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path = ".".join(str(p) for p in first["loc"])
        field = f"{where}.{name}.{path}" if path else f"{where}.{name}"
        message = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "no such parameter (unknown parameters are refused)"
        elif first["type"] == "missing":
            message = "a value (required)"
        raise ProtocolError(field, message) from None
    return PolicySpec(name=name, params=params.model_dump())


def policy_spec_for(
    policies: dict[str, Any], decision: str | None, task_id: str | None = None
) -> tuple[str, AnySpec] | None:
    """The spec that settles ``decision`` (then ``task_id``, then ``default``), if any."""
    for key in (decision, task_id, DEFAULT_DECISION):
        if key and key in policies:
            return key, parse_policy(policies[key], key)
    return None
