"""The leader's ladder: every completed result is verified here, and every verdict logged.

``run_ladder`` applies, first, the verdicts hooks made themselves (a coding team's
scope and branch checks), then the task's checks weakest first
(``tenure.verify.verify``) with what the leader has and a worker does not: the
acceptance criteria for a judge, the team's ``Trust`` (judge models), and what
hooks add (a quorum round's outcome, the directory command checks run in). Each
verdict becomes a ``verify.verdict`` event; a worker's claim that a check refutes
becomes a ``decision`` settled by structural authority (the verifier's own check
beats the worker's report).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenure import observe
from tenure.protocol import CommandEvidence, TaskResult
from tenure.protocol.clip import clip
from tenure.roles.leader.hooks import Review
from tenure.roles.register import Task
from tenure.verify import Candidate, Decision, Trust, Verdict, decision_event, verdict_event, verify
from tenure.verify.decisions import DECISION_EVENT, VERDICT_EVENT

EventSink = Callable[[str, dict[str, Any]], None]


def run_ladder(
    task: Task,
    result: TaskResult,
    review: Review,
    *,
    workdir: Path | None,
    trust: Trust,
    event: EventSink,
) -> list[Verdict]:
    """Every verdict up to the first that fails, each logged."""
    with observe.verify(
        task.team,
        task.task_id,
        attempt=task.attempt,
        epoch=task.epoch,
        key=result.idempotency_key,
    ) as span:
        verdicts = _verdicts(task, result, review, workdir=workdir, trust=trust)
        failing = next((v for v in verdicts if not v.passed), None)
        span.set("tenure.verdict.passed", failing is None)
        span.set("tenure.verdict.failed_check", failing.check if failing else None)
    extra: dict[str, Any] = {}
    if task.spec.replica_of:
        extra["replica_of"] = task.spec.replica_of
    for verdict in verdicts:
        event(
            VERDICT_EVENT,
            verdict_event(verdict, task_id=task.task_id, key=result.idempotency_key, **extra),
        )
    refuted = _claim_refuted(task, result, verdicts)
    if refuted is not None:
        event(DECISION_EVENT, refuted)
    return verdicts


def _verdicts(
    task: Task, result: TaskResult, review: Review, *, workdir: Path | None, trust: Trust
) -> list[Verdict]:
    """The hooks' own verdicts, then the task's checks, up to the first that fails."""
    verdicts = list(review.verdicts)
    if all(v.passed for v in verdicts):
        verdicts += verify(
            task.spec.checks,
            result,
            output_schema=task.spec.output_schema,
            workdir=review.workdir or workdir,
            criteria=list(task.spec.acceptance_criteria),
            trust=trust,
            quorum=review.quorum,
            from_rung=review.from_rung,
        )
    else:
        verdicts = verdicts[: next(i for i, v in enumerate(verdicts) if not v.passed) + 1]
    return verdicts


def _claim_refuted(
    task: Task, result: TaskResult, verdicts: list[Verdict]
) -> dict[str, Any] | None:
    """A worker that said it verified its work, refuted by the verifier's own check:
    a disagreement settled by structural authority, and logged as such."""
    failing = next((v for v in verdicts if not v.passed), None)
    if failing is None or failing.check not in ("command", "schema", "evidence", "judge"):
        return None
    claims = list(result.notes.verified)
    claims += [
        f"$ {e.command} (exit {e.exit_code})"
        for e in result.evidence
        if isinstance(e, CommandEvidence) and e.exit_code == 0
    ]
    if not claims:
        return None
    worker = Candidate(
        ref=result.idempotency_key,
        answer={"claims": claims[:5]},
        member=task.assignee,
        roles=("worker",),
    )
    check = Candidate(
        ref=f"check:{failing.check}",
        answer={"passed": False, "reason": clip(failing.reason, 200)},
        roles=("verifier",),
    )
    decision = Decision(
        "authority",
        check.ref,
        f"the verifier's own {failing.check} check beats the worker's report "
        f"({'; '.join(claims[:3])}): {clip(failing.reason, 200)}",
        details={"roles": "verifier > worker"},
    )
    return decision_event(
        decision,
        task_id=task.task_id,
        decision_type="completion",
        candidates=[worker, check],
        stage="authority",
    )
