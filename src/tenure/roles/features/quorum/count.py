"""Counting a quorum round: accepted answers compared, ``k`` agreeing pass, else a tie-break.

Kept apart from the rounds and their dispatch so the decision (what counts, which
policy settles a tie, when a person is asked) reads on its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.protocol import TaskResult, TenureError
from tenure.roles.leader.ladder import QUORUM_DATA, quorum_check, trust_of
from tenure.store import TaskRecord
from tenure.verify import (
    Candidate,
    Decision,
    DecisionContext,
    decision_event,
    majority,
    policy_for,
)
from tenure.verify.decisions import DECISION_EVENT, preview

if TYPE_CHECKING:
    from tenure.roles.leader.conductor import Conductor


def count_votes(conductor: Conductor, task: TaskRecord, voters: list[TaskRecord]) -> dict[str, Any]:
    """The round's outcome: its accepted answers counted, a tie broken by the plan's policy.

    The count and the tie-break are ``decision`` events; the outcome is what the caller
    stores before the task is reviewed."""
    check = quorum_check(task.spec)
    assert check is not None
    trust = trust_of(conductor.reviewer)
    candidates = [candidate_of(v) for v in voters if v.state == "done" and v.result]
    missing = [f"{v.task_id} ({v.state})" for v in voters if v.state != "done"]
    state = task.data.get(QUORUM_DATA) or {}
    decision_type = check.decision or task.task_id
    outcome: dict[str, Any] = {
        "voters": [c.ref for c in candidates],
        "decision": decision_type,
    }
    try:
        compare = trust.comparator(check.comparator)
    except TenureError as exc:
        compare = None
        outcome.update(passed=False, reason=f"quorum check cannot compare: {exc}")
    if compare is not None:
        count = majority(candidates, check.k, compare, policy=f"quorum-check {check.k}/{check.n}")
        if missing:
            count = replace(count, reason=f"{count.reason}; not accepted: {', '.join(missing)}")
        outcome["warnings"] = list(count.warnings)
        conductor.event(
            DECISION_EVENT,
            decision_event(
                count,
                task_id=task.task_id,
                decision_type=decision_type,
                candidates=candidates,
                stage="count",
                round=state.get("round"),
            ),
        )
        if count.winner is not None:
            outcome.update(passed=True, winner=count.winner, reason=count.reason)
        else:
            tie_break(conductor, task, check.decision, candidates, count.reason, outcome)
    return outcome


def tie_break(
    conductor: Conductor,
    task: TaskRecord,
    decision: str | None,
    candidates: list[Candidate],
    why: str,
    outcome: dict[str, Any],
) -> None:
    """Settle a round without ``k`` agreeing answers by the plan's tie-break policy;
    the result is written into ``outcome``."""
    if not candidates:
        outcome.update(passed=False, reason=f"no answer was accepted: {why}")
        return
    policies = task.spec.get("policies") or {}
    found = policy_for(policies, decision, task.task_id)
    if found is None:
        wanted = decision or task.task_id
        outcome.update(
            passed=False,
            reason=f"{why}; the plan names no tie-break policy for {wanted!r} (policies.{wanted})",
        )
        return
    name, policy = found
    check = quorum_check(task.spec)
    context = DecisionContext(
        decision=name,
        criteria=list(task.spec.get("acceptance_criteria", [])),
        comparator=check.comparator if check else "exact",
        trust=trust_of(conductor.reviewer),
    )
    try:
        made = policy.decide(candidates, context)
    except TenureError as exc:  # a policy's own failure is an undecided step, never a pass
        made = Decision(policy.name, None, f"the policy failed: {exc}")
    conductor.event(
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
    outcome["policy"] = policy.name
    outcome["warnings"] = sorted({*outcome.get("warnings", []), *made.warnings})
    if made.winner is not None:
        outcome.update(
            passed=True,
            winner=made.winner,
            reason=f"{why}; settled by the {name!r} policy ({policy.name}): {made.reason}",
        )
    elif made.escalate:
        answers = "; ".join(f"{c.ref} = {preview(c.answer, 80)}" for c in candidates)
        outcome.update(
            passed=False,
            escalate=True,
            reason=f"{why}; the {name!r} policy ({policy.name}) asks a person: {made.reason}",
            question=f"The answers disagree ({answers}). Which is right, and why?",
        )
    else:
        outcome.update(
            passed=False,
            reason=f"{why}; the {name!r} policy ({policy.name}) did not decide: {made.reason}",
        )


def candidate_of(voter: TaskRecord) -> Candidate:
    """A settled voter's accepted answer, with who gave it (for the shared-source warnings)."""
    result = TaskResult.model_validate(voter.result)
    who = voter.data.get("voter") or {}
    return Candidate.from_result(
        result,
        member=who.get("member") or voter.assignee,
        roles=tuple(who.get("roles", ())),
    )
