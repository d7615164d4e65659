"""Quorum: compare independent answers, count agreement, and say when the count flatters.

Answers are grouped by a *comparator*, a function from an answer to a key; two
answers agree when their keys are equal (so agreement is an equivalence, never
"A agrees with B, B with C, but not A with C"):

``exact``
    the answers as they are: the same JSON value, object key order aside
    (``1`` and ``1.0`` differ, and so do ``"{\\"a\\": 1}"`` and ``{"a": 1}``).
``json``
    the answers as parsed JSON: a string holding JSON is read first, numbers
    compare by value, so key order, spacing and ``1`` vs ``1.0`` do not matter.

A library caller may register more comparators in ``COMPARATORS`` (or pass
them to ``Trust``) and name them in code.

Agreement among voters that share a model, or a provider, is weaker evidence
than the count suggests: their errors correlate. ``correlation_warnings`` says
so, and every quorum decision carries those warnings into the log.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from tenure.protocol.limits import MAX_BODY_BYTES, decode_json
from tenure.verify.decisions import Candidate, Decision, preview

Comparator = Callable[[Any], str]


def exact_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def json_key(value: Any) -> str:
    return json.dumps(_normal(value), sort_keys=True, ensure_ascii=False, default=repr)


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null") or _numeric(text):
            try:  # depth-limited: a worker's string may be a JSON bomb
                return _normal_parsed(decode_json(text, field="vote", limit=MAX_BODY_BYTES))
            except ValueError:
                return value
        return value
    return _normal_parsed(value)


def _normal_parsed(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        number = float(value)
        if math.isfinite(number) and number == int(number) and abs(number) < 2**53:
            return int(number)
        return number
    if isinstance(value, dict):
        return {str(k): _normal_parsed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal_parsed(v) for v in value]
    return value


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


COMPARATORS: dict[str, Comparator] = {"exact": exact_key, "json": json_key}


def comparator(name: str, extra: Mapping[str, Comparator] | None = None) -> Comparator:
    """The comparator called ``name``; ValueError naming the known ones if none is."""
    known = {**COMPARATORS, **(extra or {})}
    if name not in known:
        raise ValueError(f"unknown comparator {name!r}: use one of {', '.join(sorted(known))}")
    return known[name]


def group(candidates: list[Candidate], compare: Comparator) -> list[list[Candidate]]:
    """Candidates grouped by agreement, the biggest group first (ties: first seen first)."""
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(compare(candidate.answer), []).append(candidate)
    return sorted(groups.values(), key=len, reverse=True)


def distinct_votes(candidates: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """The candidates with one vote per worker (the first each worker gave), and the
    votes left out because their worker had voted already. A candidate with no known
    worker counts on its own."""
    kept: list[Candidate] = []
    dropped: list[Candidate] = []
    seen: set[str] = set()
    for candidate in candidates:
        if candidate.member is not None and candidate.member in seen:
            dropped.append(candidate)
            continue
        if candidate.member is not None:
            seen.add(candidate.member)
        kept.append(candidate)
    return kept, dropped


def majority(
    candidates: list[Candidate], k: int, compare: Comparator, *, policy: str = "quorum"
) -> Decision:
    """A winner when at least ``k`` candidates agree and no other group is as big.

    One worker's votes count once: a second vote of a worker is left out (and said so)."""
    candidates, dropped = distinct_votes(candidates)
    warnings = tuple(correlation_warnings(candidates)) + tuple(
        f"{c.ref} is not counted: its worker {c.member} voted already" for c in dropped
    )
    if not candidates:
        return Decision(policy, None, "no answers to count", warnings=warnings)
    groups = group(candidates, compare)
    tally = ", ".join(f"{preview(g[0].answer, 60)} x{len(g)}" for g in groups)
    top = groups[0]
    if len(top) < k:
        reason = f"only {len(top)} of {len(candidates)} agree, {k} needed ({tally})"
        return Decision(policy, None, reason, warnings=warnings, details={"tally": tally})
    if len(groups) > 1 and len(groups[1]) == len(top):
        reason = f"two answers have {len(top)} votes each ({tally})"
        return Decision(policy, None, reason, warnings=warnings, details={"tally": tally})
    voters = ", ".join(c.ref for c in top)
    reason = f"{len(top)} of {len(candidates)} agree (k = {k}): {voters}"
    return Decision(policy, top[0].ref, reason, warnings=warnings, details={"tally": tally})


def correlation_warnings(candidates: list[Candidate]) -> list[str]:
    """Why agreement among these voters may be weaker than it looks."""
    warnings: list[str] = []
    by_model: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.model:
            by_model.setdefault(candidate.model, []).append(candidate)
    for model, voters in by_model.items():
        if len(voters) > 1:
            warnings.append(
                f"{len(voters)} voters share the model {model} "
                f"({', '.join(c.ref for c in voters)}): their errors correlate, so their "
                "agreement is weaker evidence than independent votes"
            )
    by_provider: dict[str, set[str]] = {}
    for candidate in candidates:
        if candidate.provider and candidate.model:
            by_provider.setdefault(candidate.provider, set()).add(candidate.model)
    for provider, models in by_provider.items():
        if len(models) > 1:
            warnings.append(
                f"voters use {len(models)} models of one provider, {provider} "
                f"({', '.join(sorted(models))}): errors correlate within a provider"
            )
    by_member: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.member:
            by_member.setdefault(candidate.member, []).append(candidate)
    for member, voters in by_member.items():
        if len(voters) > 1:
            warnings.append(
                f"{len(voters)} votes come from one worker, {member} "
                f"({', '.join(c.ref for c in voters)}): they are not independent executions"
            )
    return warnings
