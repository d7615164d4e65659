"""A model as judge: grade an artifact against criteria, or compare two, in a fresh context.

Each call starts a new conversation holding the acceptance criteria first and
then the artifact(s), nothing else: not who made it, not the worker's notes,
confidence or evidence, not any earlier conversation. A judge sees what a
reviewer would see on a blank desk.

LLM judges prefer answers by position (often the first shown). ``compare``
therefore asks twice, in both orders, and counts a disagreement between the two
orders as a tie: a preference that flips with the order is not a preference for
an answer.

Every failure (the model errs, refuses, or replies with something that is not
the JSON asked for) raises ``JudgeError`` with the reason; callers turn it into
a failed verdict or an undecided tie-break, never a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from tenure.models import ChatMessage, Completion, Model, ModelError, traced
from tenure.protocol import JudgeCheck, TaskResult
from tenure.protocol.clip import clip
from tenure.verify.checks import Verdict
from tenure.verify.decisions import preview

ARTIFACT_LIMIT = 12_000
SYSTEM = (
    "You are a strict, impartial grader. You see acceptance criteria and the work to "
    "grade, nothing else. Judge only whether the work meets the criteria; do not reward "
    "length, confidence or style. Reply with JSON only."
)
GRADE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}
COMPARE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "better": {"type": "string", "enum": ["A", "B", "tie"]},
        "reason": {"type": "string"},
    },
    "required": ["better", "reason"],
    "additionalProperties": False,
}
Side = Literal["a", "b"]


class JudgeError(Exception):
    """The judge could not give a usable answer; the message says why."""


@dataclass(frozen=True)
class Grade:
    score: float
    reason: str
    model: str
    cost_usd: float = 0.0


@dataclass(frozen=True)
class Preference:
    """The outcome of a both-orders comparison: ``winner`` is None for a tie."""

    winner: Side | None
    reason: str
    first_order: str  # what the judge said with ``a`` shown first: "a", "b" or "tie"
    second_order: str  # with ``b`` shown first
    model: str = ""


def criteria_block(criteria: list[str]) -> str:
    lines = "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, 1))
    return f"## Acceptance criteria\n{lines}"


def render(artifact: Any) -> str:
    if isinstance(artifact, str):
        text = artifact
    else:
        text = json.dumps(artifact, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > ARTIFACT_LIMIT:
        text = text[:ARTIFACT_LIMIT] + f"\n[... cut at {ARTIFACT_LIMIT} characters]"
    return text


def grade_messages(criteria: list[str], artifact: Any) -> list[ChatMessage]:
    """The whole conversation a grading judge sees: criteria first, then the work."""
    user = (
        f"{criteria_block(criteria)}\n\n## Work to grade\n```\n{render(artifact)}\n```\n\n"
        'Reply with JSON only: {"score": <0 to 1, how fully the work meets every '
        'criterion>, "reason": "<one or two sentences>"}'
    )
    return [ChatMessage("system", SYSTEM), ChatMessage("user", user)]


def compare_messages(criteria: list[str], first: Any, second: Any) -> list[ChatMessage]:
    """The conversation of one comparison: criteria, then answer A, then answer B."""
    user = (
        f"{criteria_block(criteria)}\n\n## Answer A\n```\n{render(first)}\n```\n\n"
        f"## Answer B\n```\n{render(second)}\n```\n\n"
        "Which answer better meets the criteria? Reply with JSON only: "
        '{"better": "A" or "B" or "tie", "reason": "<one or two sentences>"}'
    )
    return [ChatMessage("system", SYSTEM), ChatMessage("user", user)]


def grade(model: Model, criteria: list[str], artifact: Any) -> Grade:
    """A score in [0, 1] for how well ``artifact`` meets ``criteria``; JudgeError if none."""
    if not criteria:
        raise JudgeError(
            "there are no acceptance criteria to grade against (a judge does not guess them)"
        )
    reply = _ask(model, grade_messages(criteria, artifact), GRADE_SCHEMA)
    score = reply.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise JudgeError(f"the judge's score must be a number from 0 to 1; got {score!r:.60}")
    reason = str(reply.get("reason", "")).strip() or "(no reason given)"
    return Grade(float(score), reason, _name(model))


def compare(model: Model, criteria: list[str], a: Any, b: Any) -> Preference:
    """Which of ``a`` and ``b`` better meets ``criteria``, asked in both orders."""
    if not criteria:
        raise JudgeError(
            "there are no acceptance criteria to compare against (a judge does not guess them)"
        )
    first = _pick(_ask(model, compare_messages(criteria, a, b), COMPARE_SCHEMA))
    flipped = _pick(_ask(model, compare_messages(criteria, b, a), COMPARE_SCHEMA))
    second = {"A": "b", "B": "a", "tie": "tie"}[flipped]
    first_side = {"A": "a", "B": "b", "tie": "tie"}[first]
    name = _name(model)
    if first_side == second and first_side in ("a", "b"):
        side: Side = "a" if first_side == "a" else "b"
        return Preference(side, f"preferred {side} in both orders", first_side, second, name)
    if first_side == second:
        return Preference(None, "a tie in both orders", first_side, second, name)
    if first == flipped and first in ("A", "B"):
        where = "first" if first == "A" else "second"
        why = f"the judge preferred whichever answer was shown {where} (position bias)"
    else:
        why = "the judge's preference changed with the order"
    return Preference(None, f"counted as a tie: {why}", first_side, second, name)


def check_judge(
    check: JudgeCheck, model: Model, criteria: list[str], result: TaskResult
) -> Verdict:
    """The ``judge`` rung of the ladder: grade, and pass at ``pass_threshold`` or above."""
    try:
        graded = grade(model, criteria, result.artifact)
    except JudgeError as exc:
        return Verdict("judge", False, f"the judge gave no usable grade: {exc}")
    seen = {
        "model": graded.model,
        "score": graded.score,
        "threshold": check.pass_threshold,
        "judge_reason": clip(graded.reason, 300),
    }
    verdict = "passes" if graded.score >= check.pass_threshold else "fails"
    reason = (
        f"{graded.model} graded {graded.score:.2f} (pass at {check.pass_threshold:g}), "
        f"{verdict}: {graded.reason}"
    )
    return Verdict("judge", graded.score >= check.pass_threshold, reason, seen)


def _ask(model: Model, messages: list[ChatMessage], schema: dict[str, Any]) -> dict[str, Any]:
    try:
        completion: Completion = traced.complete(
            model, messages, json_schema=schema, max_tokens=400
        )
    except ModelError as exc:
        raise JudgeError(f"the judge model failed: {exc}") from None
    except Exception as exc:  # an adapter or scripted judge bug is a failed judgement
        raise JudgeError(f"the judge model failed: {type(exc).__name__}: {exc}") from None
    if completion.refusal:
        raise JudgeError(f"the judge refused: {completion.refusal[:200]}")
    try:
        reply = completion.json()
    except ValueError:
        raise JudgeError(
            f"the judge's reply is not the JSON asked for: {preview(completion.text, 160)}"
        ) from None
    if not isinstance(reply, dict):
        raise JudgeError(f"the judge's reply is not a JSON object: {preview(reply, 160)}")
    return reply


def _pick(reply: dict[str, Any]) -> str:
    better = str(reply.get("better", "")).strip()
    normal = {"a": "A", "b": "B", "tie": "tie"}.get(better.lower())
    if normal is None:
        raise JudgeError(f'the judge must answer "A", "B" or "tie"; got {better!r:.40}')
    return normal


def _name(model: Model) -> str:
    provider = getattr(model, "provider", "") or ""
    name = getattr(model, "name", "") or "model"
    return f"{provider}:{name}" if provider else name
