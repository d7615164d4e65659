"""Counting a quorum round: accepted answers compared, ``k`` agreeing pass, else a tie-break.

Kept apart from the rounds and their dispatch so the decision (what counts, which
policy settles a tie, when a person is asked) reads on its own.
"""

from __future__ import annotations

from dataclasses import replace

from tenure.protocol import QuorumCheck, TaskResult, TenureError
from tenure.protocol.taskspec import QuorumOutcome
from tenure.roles.leader import LeaderContext
from tenure.roles.register import Task
from tenure.verify import (
    Candidate,
    Decision,
    DecisionContext,
    decision_event,
    distinct_votes,
    majority,
    policy_for,
)
from tenure.verify.decisions import DECISION_EVENT, preview


def quorum_check(task: Task) -> QuorumCheck | None:
    """The quorum check of a task that is run as a quorum (not of one of its voters)."""
    if task.spec.replica_of:
        return None
    return next((c for c in task.spec.checks if isinstance(c, QuorumCheck)), None)


def count_votes(ctx: LeaderContext, task: Task, voters: list[Task]) -> QuorumOutcome:
    """The round's outcome: its accepted answers counted, one per worker (a second vote
    of a worker is left out, and said so), a tie broken by the plan's policy.

    The count and the tie-break are ``decision`` events; the outcome is what the caller
    stores before the task is reviewed."""
    check = quorum_check(task)
    assert check is not None
    given = [candidate_of(v) for v in voters if v.is_done and v.result]
    candidates, twice = distinct_votes(given)  # never two votes of one worker
    missing = [f"{v.task_id} ({v.problem or v.state})" for v in voters if not v.is_done]
    missing += [f"{c.ref} (a second vote of {c.member})" for c in twice]
    decision_type = check.decision or task.task_id
    voted = QuorumOutcome(voters=[c.ref for c in candidates], decision=decision_type)
    try:
        compare = ctx.trust.comparator(check.comparator)
    except TenureError as exc:
        return voted.model_copy(update={"reason": f"quorum check cannot compare: {exc}"})
    count = majority(candidates, check.k, compare, policy=f"quorum-check {check.k}/{check.n}")
    if missing:
        count = replace(count, reason=f"{count.reason}; not accepted: {', '.join(missing)}")
    voted = voted.model_copy(update={"warnings": list(count.warnings)})
    round_ = task.data.quorum.round if task.data.quorum else None
    ctx.event(
        DECISION_EVENT,
        decision_event(
            count,
            task_id=task.task_id,
            decision_type=decision_type,
            candidates=candidates,
            stage="count",
            round=round_,
        ),
    )
    if count.winner is not None:
        return voted.model_copy(
            update={"passed": True, "winner": count.winner, "reason": count.reason}
        )
    return tie_break(ctx, task, check, candidates, count.reason, voted)


def tie_break(
    ctx: LeaderContext,
    task: Task,
    check: QuorumCheck,
    candidates: list[Candidate],
    why: str,
    outcome: QuorumOutcome,
) -> QuorumOutcome:
    """Settle a round without ``k`` agreeing answers by the plan's tie-break policy."""
    if not candidates:
        return outcome.model_copy(update={"reason": f"no answer was accepted: {why}"})
    found = policy_for(task.spec.policies, check.decision, task.task_id)
    if found is None:
        wanted = check.decision or task.task_id
        reason = f"{why}; the plan names no tie-break policy for {wanted!r} (policies.{wanted})"
        return outcome.model_copy(update={"reason": reason})
    name, policy = found
    context = DecisionContext(
        decision=name,
        criteria=list(task.spec.acceptance_criteria),
        comparator=check.comparator,
        trust=ctx.trust,
    )
    try:
        made = policy.decide(candidates, context)
    except TenureError as exc:  # a policy's own failure is an undecided step, never a pass
        made = Decision(policy.name, None, f"the policy failed: {exc}")
    ctx.event(
        DECISION_EVENT,
        decision_event(
            made,
            task_id=task.task_id,
            decision_type=name,
            candidates=candidates,
            stage="tie-break",
            describe=policy.describe(),
        ),
    )
    warnings = sorted({*outcome.warnings, *made.warnings})
    said = f"the {name!r} policy ({policy.name})"
    update: dict[str, object]
    if made.winner is not None:
        reason = f"{why}; settled by {said}: {made.reason}"
        update = {"passed": True, "winner": made.winner, "reason": reason}
    elif made.escalate:
        answers = "; ".join(f"{c.ref} = {preview(c.answer, 80)}" for c in candidates)
        update = {
            "escalate": True,
            "reason": f"{why}; {said} asks a person: {made.reason}",
            "question": f"The answers disagree ({answers}). Which is right, and why?",
        }
    else:
        update = {"reason": f"{why}; {said} did not decide: {made.reason}"}
    return outcome.model_copy(update={**update, "policy": policy.name, "warnings": warnings})


def candidate_of(voter: Task) -> Candidate:
    """A settled voter's accepted answer, with who gave it (for the shared-source warnings)."""
    result = TaskResult.model_validate(voter.result)
    who = voter.data.voter
    return Candidate.from_result(
        result,
        member=who.member if who else voter.assignee,
        roles=tuple(who.roles) if who else (),
    )
