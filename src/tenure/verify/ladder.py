"""The verification ladder: apply a task's checks weakest first, stop at the first failure.

``schema`` < ``evidence`` < ``judge`` < ``quorum`` < ``command``. The ``judge``
rung needs a model (from ``trust``); the ``quorum`` rung needs the answers of
independent executions, which only the leader's runtime has: it passes a
``quorum`` function that returns the rung's verdict. Without one, the rung
fails and says why. Nothing on the ladder passes by default.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tenure import observe
from tenure.protocol import (
    Check,
    CommandCheck,
    EvidenceCheck,
    JudgeCheck,
    QuorumCheck,
    SchemaCheck,
    TaskResult,
    TenureError,
)
from tenure.verify.checks import Verdict, check_command, check_evidence, check_schema
from tenure.verify.judge import check_judge
from tenure.verify.trust import Trust

LADDER_ORDER = {"schema": 0, "evidence": 1, "judge": 2, "quorum": 3, "command": 4}
QuorumRung = Callable[[QuorumCheck], Verdict]


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
    criteria: list[str] | None = None,
    trust: Trust | None = None,
    quorum: QuorumRung | None = None,
    from_rung: str | None = None,
) -> list[Verdict]:
    """Verdicts of every check up to and including the first that fails.

    ``criteria`` are what a judge grades against; ``from_rung`` skips the rungs
    below it (a quorum's voters passed those one by one already). A completed
    result on a task without checks is accepted as a self-report, and the verdict
    says so plainly, so the decision log never hides it.
    """
    ladder = checks_for(checks, output_schema)
    if from_rung is not None:
        ladder = [c for c in ladder if LADDER_ORDER[c.kind] >= LADDER_ORDER[from_rung]]
    if not ladder:
        return [Verdict("self-report", True, "no checks declared; accepted on the worker's word")]
    verdicts: list[Verdict] = []
    for check in ladder:
        with observe.check(check.kind) as span:
            verdict = _run(check, result, workdir, criteria or [], trust, quorum)
            observe.verdict(span, verdict.passed, verdict.reason)
        verdicts.append(verdict)
        if not verdict.passed:
            break
    return verdicts


def _run(
    check: Check,
    result: TaskResult,
    workdir: Path | None,
    criteria: list[str],
    trust: Trust | None,
    quorum: QuorumRung | None,
) -> Verdict:
    if isinstance(check, SchemaCheck):
        return check_schema(check, result)
    if isinstance(check, EvidenceCheck):
        return check_evidence(check, result)
    if isinstance(check, CommandCheck):
        return check_command(check, workdir)
    if isinstance(check, JudgeCheck):
        try:
            model = (trust or Trust()).model(check.model)
        except TenureError as exc:
            return Verdict("judge", False, f"the judge check could not run: {exc}")
        return check_judge(check, model, criteria, result)
    if isinstance(check, QuorumCheck):
        if quorum is None:
            return Verdict(
                "quorum",
                False,
                f"the quorum check needs {check.n} independent executions; one result is "
                "not enough: only a leader running the task as a quorum can verify it",
            )
        return quorum(check)
    return Verdict(  # a kind this version does not know: never a silent pass
        str(getattr(check, "kind", "?")), False, f"unknown check kind {check!r:.80}"
    )
