"""The leader's ladder: every completed result is verified here, and every verdict logged.

``run_ladder`` is what the reviewer calls for a completed result. It applies the
task's checks weakest first (``tenure.verify.verify``) with what the leader has
and a worker does not: the acceptance criteria for a judge, the team's
``Trust`` (judge models), and, for a task run as a quorum, the outcome of its
round of independent executions. Each verdict becomes a ``verify.verdict``
event; a worker's claim that a check refutes becomes a ``decision`` settled by
structural authority (the verifier's own check beats the worker's report).

It returns the verdicts, or None when the decision went to a person (the task
is then blocked in the inbox).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from tenure.protocol import Check, CommandEvidence, QuorumCheck, TaskResult
from tenure.store import TaskRecord
from tenure.verify import (
    Candidate,
    Decision,
    Trust,
    Verdict,
    decision_event,
    verdict_event,
    verify,
)
from tenure.verify.decisions import DECISION_EVENT, VERDICT_EVENT

if TYPE_CHECKING:
    from tenure.roles.leader.review import Reviewer

_CHECKS: TypeAdapter[list[Check]] = TypeAdapter(list[Check])
REPLICA_OF = "replica_of"
QUORUM_DATA = "quorum"


def trust_of(reviewer: Reviewer) -> Trust:
    trust = getattr(reviewer, "trust", None)
    return trust if isinstance(trust, Trust) else Trust()


def task_checks(spec: dict[str, Any]) -> list[Check]:
    """The checks a task's spec declares (ValidationError if the register holds bad ones)."""
    return _CHECKS.validate_python(spec.get("checks", []))


def quorum_check(spec: dict[str, Any]) -> QuorumCheck | None:
    """The quorum check of a task that is run as a quorum (not of one of its voters)."""
    if spec.get(REPLICA_OF):
        return None
    try:
        checks = task_checks(spec)
    except ValidationError:
        return None
    return next((c for c in checks if isinstance(c, QuorumCheck)), None)


def run_ladder(reviewer: Reviewer, task: TaskRecord, result: TaskResult) -> list[Verdict] | None:
    key = result.idempotency_key
    extra: dict[str, Any] = {}
    if task.spec.get(REPLICA_OF):
        extra["replica_of"] = task.spec[REPLICA_OF]
    try:
        checks = task_checks(task.spec)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        bad = Verdict("checks", False, f"the task's checks are not valid: {where}: {first['msg']}")
        reviewer.event(VERDICT_EVENT, verdict_event(bad, task_id=task.task_id, key=key))
        return [bad]
    quorum_rung = None
    from_rung = None
    outcome = (task.data.get(QUORUM_DATA) or {}).get("outcome")
    if quorum_check(task.spec) is not None and outcome is not None:
        from_rung = "quorum"  # each voter passed the weaker rungs on its own
        if outcome.get("escalate"):
            verdict = Verdict("quorum", False, f"sent to a person: {outcome['reason']}")
            reviewer.event(
                VERDICT_EVENT,
                verdict_event(verdict, task_id=task.task_id, key=key, escalated=True, **extra),
            )
            reviewer.block(
                task,
                f"tie-break: {outcome['reason']}",
                question=str(outcome.get("question") or outcome["reason"]),
            )
            return None

        def quorum_rung(check: QuorumCheck) -> Verdict:
            seen = {
                "voters": outcome.get("voters", []),
                "winner": outcome.get("winner"),
                "policy": outcome.get("policy"),
                "warnings": outcome.get("warnings", []),
            }
            return Verdict("quorum", bool(outcome.get("passed")), str(outcome["reason"]), seen)

    verdicts = verify(
        checks,
        result,
        output_schema=task.spec.get("output_schema"),
        workdir=reviewer.workdir,
        criteria=list(task.spec.get("acceptance_criteria", [])),
        trust=trust_of(reviewer),
        quorum=quorum_rung,
        from_rung=from_rung,
    )
    for verdict in verdicts:
        reviewer.event(
            VERDICT_EVENT, verdict_event(verdict, task_id=task.task_id, key=key, **extra)
        )
    _claim_refuted(reviewer, task, result, verdicts)
    return verdicts


def _claim_refuted(
    reviewer: Reviewer, task: TaskRecord, result: TaskResult, verdicts: list[Verdict]
) -> None:
    """A worker that said it verified its work, refuted by the verifier's own check:
    a disagreement settled by structural authority, and logged as such."""
    failing = next((v for v in verdicts if not v.passed), None)
    if failing is None or failing.check not in ("command", "schema", "evidence", "judge"):
        return
    claims = list(result.notes.verified)
    claims += [
        f"$ {e.command} (exit {e.exit_code})"
        for e in result.evidence
        if isinstance(e, CommandEvidence) and e.exit_code == 0
    ]
    if not claims:
        return
    worker = Candidate(
        ref=result.idempotency_key,
        answer={"claims": claims[:5]},
        member=task.assignee,
        roles=("worker",),
    )
    check = Candidate(
        ref=f"check:{failing.check}",
        answer={"passed": False, "reason": failing.reason[:200]},
        roles=("verifier",),
    )
    decision = Decision(
        "authority",
        check.ref,
        f"the verifier's own {failing.check} check beats the worker's report "
        f"({'; '.join(claims[:3])}): {failing.reason[:200]}",
        details={"roles": "verifier > worker"},
    )
    reviewer.event(
        DECISION_EVENT,
        decision_event(
            decision,
            task_id=task.task_id,
            decision_type="completion",
            candidates=[worker, check],
            stage="authority",
        ),
    )
