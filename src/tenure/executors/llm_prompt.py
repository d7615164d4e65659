"""What the model reads: the system prompt, the envelope rendered, the check-ins.

The acceptance criteria come FIRST (they decide acceptance), then the checks the
leader will run, the goal, the input, the materials, the scope, the history of
earlier failed attempts and the output schema.
"""

from __future__ import annotations

import json
from typing import Any

from tenure.executors.llm_answer import result_schema
from tenure.executors.llm_materials import SKIP_INPUT_KEYS, Material
from tenure.protocol import TaskEnvelope
from tenure.protocol.envelope import CommandCheck, EvidenceCheck, SchemaCheck

WORKER_SYSTEM = """\
You are a worker on a Tenure team. You do exactly one task and report on it honestly.
- Meet every acceptance criterion. They come first because they decide whether your work is accepted.
- Use only the input and the materials you are given. A value you cannot find is null: never estimate or invent one.
- Give each value you report a source in "evidence": {"source": <material name>, "field": <artifact field>}.
- If you cannot go on without information you do not have, answer status "blocked" with a "question".
- If the task asks for something you must not do, answer status "refused" and say why in notes.uncertain.
- If you tried and could not do it, answer status "failed" and say why in notes.uncertain.
- Never claim in notes.verified that you checked something you did not check.
Reply with one JSON object in the output schema and nothing else."""


def render_envelope(
    envelope: TaskEnvelope, materials: dict[str, Material] | None = None, *, turns: int = 1
) -> str:
    """The envelope as the model reads it: criteria first, output schema last."""
    parts = ["## Acceptance criteria (your work is judged by these)"]
    parts += _criteria(envelope)
    checks = [_describe_check(c) for c in envelope.checks]
    if envelope.output_schema is not None and not any(
        isinstance(c, SchemaCheck) for c in envelope.checks
    ):
        checks.append("schema: the artifact must match the output schema below")
    if checks:
        parts += ["", "## Checks the leader runs on your result", *[f"- {c}" for c in checks]]
    parts += ["", "## Goal", envelope.goal]
    shown_input = {k: v for k, v in envelope.input.items() if k not in SKIP_INPUT_KEYS}
    if shown_input:
        parts += ["", "## Input", _json_block(shown_input)]
    deps = envelope.input.get("from_dependencies")
    if deps:
        parts += ["", "## Results of the tasks this one depends on", _json_block(deps)]
    answers = envelope.input.get("operator_answers")
    if answers:
        parts += ["", "## Answers from the operator", _json_block(answers)]
    if materials:
        parts += ["", "## Materials (files named in the input, read for you)"]
        for material in materials.values():
            parts += [
                f"### {material.name} (read {material.read_at.isoformat(timespec='seconds')})",
                "```",
                material.text,
                "```",
            ]
    if envelope.scope:
        parts += ["", "## Scope (the only things you may change)"]
        parts += [f"- {item}" for item in envelope.scope]
    if envelope.history:
        parts += ["", "## Earlier attempts that failed (do not repeat these mistakes)"]
        parts += [f"- attempt {h.attempt} ({h.status}): {h.failure}" for h in envelope.history]
    parts += ["", "## Output", "Reply with one JSON object in this schema:"]
    parts.append(_json_block(result_schema(envelope, more_turns=turns > 1)))
    if turns > 1:
        parts.append(
            f'You have up to {turns} turns. Answer status "continue" with a short "progress" '
            "note to take another turn; the last turn must give a final status."
        )
    return "\n".join(parts)


def checkin_message(envelope: TaskEnvelope, turn: int, turns: int) -> str:
    """The check-in between turns: the criteria restated, every time."""
    last = turn >= turns
    return "\n".join(
        [
            f"Check-in: turn {turn} of {turns}. The acceptance criteria, restated:",
            *_criteria(envelope),
            f"Goal: {envelope.goal}",
            "This is your last turn: give a final status (completed, blocked, refused or failed)."
            if last
            else 'Continue. Reply with the next JSON object ("continue" or a final status).',
        ]
    )


def repair_message(error: str) -> str:
    return (
        f"Your reply was not a valid result: {error}\n"
        "Reply again with only the corrected JSON object, in the output schema."
    )


def _criteria(envelope: TaskEnvelope) -> list[str]:
    if not envelope.acceptance_criteria:
        return ["(none stated beyond the goal)"]
    return [f"{n}. {text}" for n, text in enumerate(envelope.acceptance_criteria, 1)]


def _describe_check(check: Any) -> str:
    if isinstance(check, SchemaCheck):
        return "schema: the artifact must match the output schema below"
    if isinstance(check, EvidenceCheck):
        age = f" retrieved within {check.max_age_seconds:g}s" if check.max_age_seconds else ""
        return f"evidence: every known value needs a cited source{age}; unknown values are null"
    if isinstance(check, CommandCheck):
        return f"command: the leader runs `{check.run}` and expects exit {check.expect_exit}"
    return f"{check.kind}: see the criteria"


def _json_block(value: Any) -> str:
    return "```json\n" + json.dumps(value, indent=2, default=str) + "\n```"
