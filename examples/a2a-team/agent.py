"""The served team's worker (``--exec python:agent:work``): counts the words of the
goal. A goal starting with "ask" first asks which unit to count in."""

from __future__ import annotations

from typing import Any

from tenure import TaskContext, TaskEnvelope, make_result


def work(envelope: TaskEnvelope, ctx: TaskContext) -> Any:
    answers = envelope.input.get("operator_answers") or []
    if envelope.goal.startswith("ask") and not answers:
        return make_result(envelope, "blocked", question="Count words or letters?")
    unit = answers[-1]["answer"] if answers else "words"
    count = len(envelope.goal.split()) if unit == "words" else len(envelope.goal)
    return {"goal": envelope.goal, "unit": unit, "count": count}
