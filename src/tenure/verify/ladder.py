"""The verification ladder: apply a task's checks weakest first, stop at the first failure."""

from __future__ import annotations

from pathlib import Path

from tenure.protocol import (
    Check,
    CommandCheck,
    EvidenceCheck,
    JudgeCheck,
    QuorumCheck,
    SchemaCheck,
    TaskResult,
)
from tenure.verify.checks import Verdict, check_command, check_evidence, check_schema

LADDER_ORDER = {"schema": 0, "evidence": 1, "judge": 2, "quorum": 3, "command": 4}


def checks_for(checks: list[Check], output_schema: dict[str, object] | None) -> list[Check]:
    """The declared checks in ladder order; an ``output_schema`` adds a schema check."""
    ordered = list(checks)
    if output_schema is not None and not any(isinstance(c, SchemaCheck) for c in ordered):
        ordered.append(SchemaCheck.model_validate({"schema": output_schema}))
    return sorted(ordered, key=lambda c: LADDER_ORDER[c.kind])


def verify(
    checks: list[Check],
    result: TaskResult,
    *,
    output_schema: dict[str, object] | None = None,
    workdir: Path | None = None,
) -> list[Verdict]:
    """Verdicts of every check up to and including the first that fails.

    A completed result on a task without checks is accepted as a self-report,
    and the verdict says so plainly, so the decision log never hides it.
    """
    ladder = checks_for(checks, output_schema)
    if not ladder:
        return [Verdict("self-report", True, "no checks declared; accepted on the worker's word")]
    verdicts: list[Verdict] = []
    for check in ladder:
        verdict = _run(check, result, workdir)
        verdicts.append(verdict)
        if not verdict.passed:
            break
    return verdicts


def _run(check: Check, result: TaskResult, workdir: Path | None) -> Verdict:
    if isinstance(check, SchemaCheck):
        return check_schema(check, result)
    if isinstance(check, EvidenceCheck):
        return check_evidence(check, result)
    if isinstance(check, CommandCheck):
        return check_command(check, workdir)
    if isinstance(check, JudgeCheck | QuorumCheck):
        return Verdict(
            check.kind,
            False,
            f"the {check.kind} check needs the trust layer's "
            "judge/quorum support, which this leader does not have configured",
        )
    raise AssertionError(f"unhandled check {check!r}")
