"""Quorum in the runtime: a task with a ``quorum`` check is executed by n workers independently.

For each round the leader registers n *voter* tasks ``<task>.q<round>.v<i>``
(same goal, input, criteria and weaker checks; ``spec.replica_of`` names the
task) and dispatches them to n distinct workers: a voter waits for a worker that
holds no other vote of its round, and when the team has too few of them for the
check's ``wait_seconds`` the task goes to a person with that reason. Two votes of
one worker are never counted (``count``).
Each voter is an ordinary task: its own attempts, idempotency keys, ladder
(schema, evidence, judge) and retries. The task itself stays queued, marked
with ``data.quorum``, and is never dispatched.

When every voter has settled, the answers of those that were accepted are
compared with the check's comparator. ``k`` agreeing answers pass; otherwise
the plan's tie-break policy for the check's ``decision`` type (or the task id,
or ``default``) settles it: a winner passes, ``human`` (or policies that
disagree) sends the task to the inbox, and anything else fails the check,
whose reason becomes the failure history of the next round. The outcome is
stored in the register before the task is reviewed, so a new leader reviews
the same outcome instead of asking a judge again. The count and the
tie-break are ``decision`` events; voters that share a model, a provider or a
worker are warned about in both.

``QuorumHook`` holds quorum tasks and voters back from the conductor's dispatch,
runs the rounds each tick and gives the ladder's quorum rung its outcome; the
voters' registration and dispatch are in ``rounds``, the count and the tie-break
in ``count``.
"""

from __future__ import annotations

from typing import ClassVar

from tenure.protocol import QuorumCheck, TaskResult, TenureError, idempotency_key, to_dict
from tenure.protocol.clip import clip
from tenure.protocol.errors import Conflict
from tenure.protocol.taskspec import QuorumOutcome, QuorumState
from tenure.roles.features.quorum.count import count_votes, quorum_check
from tenure.roles.features.quorum.rounds import (
    cancel_open,
    dispatch_voters,
    ensure_voters,
    retire,
    shortage,
    start_round,
)
from tenure.roles.leader import GO, HOLD, Admission, LeaderContext, LeaderHook, Review
from tenure.roles.register import Task
from tenure.roles.register.spend import log_extra
from tenure.verify import Verdict, verdict_event
from tenure.verify.decisions import VERDICT_EVENT

__all__ = ["SETTLED", "QuorumHook", "held_back"]

SETTLED = ("done", "blocked", "failed", "cancelled")


def held_back(task: Task) -> bool:
    """True for tasks the conductor must not dispatch itself: quorum tasks and their voters."""
    return bool(task.spec.replica_of) or quorum_check(task) is not None


class QuorumHook(LeaderHook):
    name: ClassVar[str] = "quorum"
    stageable: ClassVar[bool] = True  # dispatch and result points: the store only

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        return HOLD if held_back(task) else GO

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        """Start, dispatch and settle quorum rounds; True if anything happened."""
        if not any(held_back(t) for t in tasks):
            return False
        by_id = {t.task_id: t for t in tasks}
        done = {t.task_id for t in tasks if t.is_done}
        acted = False
        for task in tasks:
            check = quorum_check(task)
            if check is None or task.data.split_into:
                continue  # not a quorum task, or split into parts that run on their own
            try:
                acted |= self._step(ctx, task, check, tasks, by_id, done)
            except Conflict:
                continue  # changed under us (a racing leader); the next round sees it
        return dispatch_voters(ctx, ctx.tasks()) or acted

    def _step(
        self,
        ctx: LeaderContext,
        task: Task,
        check: QuorumCheck,
        tasks: list[Task],
        by_id: dict[str, Task],
        done: set[str],
    ) -> bool:
        state = task.data.quorum
        if task.state == "queued" and not task.assignee:
            if not set(task.spec.depends_on) <= done:
                return False
            if state is None or state.round <= task.attempt:
                return start_round(ctx, task, tasks, check.n)
            acted = ensure_voters(ctx, task, state, by_id)
            voters = [by_id.get(v) for v in state.replicas]
            if voters and all(v is not None and v.state in SETTLED for v in voters):
                _settle(ctx, task, state, [v for v in voters if v is not None])
                return True
            short = shortage(ctx, task, check, state, by_id)
            if short is not None:  # too few distinct workers: never two votes from one
                cancel_open(ctx, task, state, by_id)
                ctx.event(
                    "quorum.short", {"task_id": task.task_id, "round": state.round, "reason": short}
                )
                # the round is used up: an answer starts the next one, with fresh voters
                spent = ctx.register.move(
                    task, "queued", attempt=state.round, reason=f"quorum round {state.round}: {short}"
                )
                ctx.block(spent, short, question=short)
                return True
            return acted
        if task.state == "running" and not task.assignee and state and state.outcome:
            _review(ctx, task)  # a leader stopped between settling and reviewing
            return True
        if task.state in ("cancelled", "failed", "done") and state is not None:
            return cancel_open(ctx, task, state, by_id)
        return False

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> Review | None:
        """The quorum rung's verdict is the stored outcome; a person decides an escalation."""
        state = task.data.quorum
        if quorum_check(task) is None or state is None or state.outcome is None:
            return None
        outcome = state.outcome
        if outcome.escalate:
            verdict = Verdict("quorum", False, f"sent to a person: {outcome.reason}")
            key = result.idempotency_key
            ctx.event(
                VERDICT_EVENT,
                verdict_event(verdict, task_id=task.task_id, key=key, escalated=True),
            )
            ctx.block(
                task, f"tie-break: {outcome.reason}", question=outcome.question or outcome.reason
            )
            return Review(decided=True)
        seen = {
            "voters": outcome.voters,
            "winner": outcome.winner,
            "policy": outcome.policy,
            "warnings": outcome.warnings,
        }

        def rung(check: QuorumCheck) -> Verdict:
            return Verdict("quorum", outcome.passed, outcome.reason, seen)

        return Review(quorum=rung, from_rung="quorum")  # each voter passed the weaker rungs


# --- settling: the outcome stored, then the task reviewed ---------------------------------


def _settle(ctx: LeaderContext, task: Task, state: QuorumState, voters: list[Task]) -> None:
    """Count the round's accepted answers, break a tie by the plan's policy, review."""
    meter = ctx.trust.meter
    mark = meter.mark()
    outcome = count_votes(ctx, task, voters)
    data = task.data.with_(quorum=state.model_copy(update={"outcome": outcome}))
    judged = meter.since(mark)  # a tie-break judge's calls are this task's spend
    if judged is not None:
        data = log_extra(data, "judge", judged, state.round)
    ctx.register.move(
        task,
        "running",
        attempt=state.round,
        data=data,
        reason=f"quorum round {state.round} counted",
    )
    retire(ctx, voters)
    _review(ctx, ctx.register.get(task.task_id))


def _review(ctx: LeaderContext, task: Task) -> None:
    """Give the task the winning voter's answer (if any) and put it through the ladder."""
    state = task.data.quorum
    outcome = state.outcome if state and state.outcome else QuorumOutcome()
    winner = _winner_result(ctx, outcome.winner)
    body: dict[str, object] = {
        "task_id": task.task_id,
        "idempotency_key": idempotency_key(task.task_id, max(task.attempt, 1)),
        "epoch": ctx.epoch(),
        "status": "completed",
        "notes": {
            "verified": [clip(f"quorum: {outcome.reason}", 500)],
            "uncertain": list(outcome.warnings),
        },
    }
    if winner is not None:
        body.update(
            artifact=winner.artifact,
            evidence=[to_dict(e) for e in winner.evidence],
            grounding=[to_dict(g) for g in winner.grounding],
            confidence=winner.confidence,
        )
    result = TaskResult.model_validate(body)
    ctx.review(ctx.register.move(task, "review", result=to_dict(result)))


def _winner_result(ctx: LeaderContext, ref: str | None) -> TaskResult | None:
    if not ref:
        return None
    voter_id = ref.split(":", 1)[0]
    try:
        record = ctx.register.get(voter_id)
    except TenureError:
        return None
    return TaskResult.model_validate(record.result) if record.result else None
