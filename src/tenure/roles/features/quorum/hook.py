"""Quorum in the runtime: a task with a ``quorum`` check is executed by n workers independently.

For each round the leader registers n *voter* tasks ``<task>.q<round>.v<i>``
(same goal, input, criteria and weaker checks; ``spec.replica_of`` names the
task) and dispatches them to distinct workers where the team has enough.
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

This module runs the rounds (``tick``), stores each outcome and reviews the task;
the voters' registration and dispatch are in ``quorum_rounds``, the count and the
tie-break in ``quorum_count``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.protocol import TaskResult, TenureError, idempotency_key, to_dict
from tenure.protocol.errors import Conflict
from tenure.roles.features import budget
from tenure.roles.features.quorum.count import count_votes
from tenure.roles.features.quorum.rounds import (
    VOTER_CHECKS,
    cancel_open,
    dispatch_voters,
    ensure_voters,
    replica_id,
    retire,
    start_round,
)
from tenure.roles.leader.ladder import QUORUM_DATA, REPLICA_OF, quorum_check
from tenure.store import TaskRecord

if TYPE_CHECKING:
    from tenure.roles.leader.conductor import Conductor
    from tenure.roles.leader.review import Reviewer

__all__ = ["SETTLED", "VOTER_CHECKS", "held_back", "replica_id", "tick"]

SETTLED = ("done", "blocked", "failed", "cancelled")


def held_back(task: TaskRecord) -> bool:
    """True for tasks the conductor must not dispatch itself: quorum tasks and their voters."""
    return bool(task.spec.get(REPLICA_OF)) or quorum_check(task.spec) is not None


def tick(conductor: Conductor) -> bool:
    """Start, dispatch and settle quorum rounds; True if anything happened."""
    store, team = conductor.store, conductor.team
    tasks = store.tasks(team)
    by_id = {t.task_id: t for t in tasks}
    done = {t.task_id for t in tasks if t.state == "done"}
    acted = False
    for task in tasks:
        check = quorum_check(task.spec)
        if check is None or task.data.get("split_into"):
            continue  # not a quorum task, or split into parts that run on their own
        state = task.data.get(QUORUM_DATA) or {}
        try:
            if task.state == "queued" and not task.assignee:
                if not set(task.spec.get("depends_on", [])) <= done:
                    continue
                if int(state.get("round", 0)) <= task.attempt:
                    acted |= start_round(conductor, task, tasks, check.n)
                else:
                    acted |= ensure_voters(conductor, task, state, by_id)
                    voters = [by_id.get(v) for v in state.get("replicas", [])]
                    if voters and all(v is not None and v.state in SETTLED for v in voters):
                        _settle(conductor, task, [v for v in voters if v is not None])
                        acted = True
            elif task.state == "running" and not task.assignee and state.get("outcome"):
                _review(conductor, task)  # a leader stopped between settling and reviewing
                acted = True
            elif task.state in ("cancelled", "failed", "done"):
                acted |= cancel_open(conductor, task, state, by_id)
        except Conflict:
            continue  # changed under us (a racing leader); the next round sees it
    acted |= dispatch_voters(conductor)
    return acted


# --- settling: the outcome stored, then the task reviewed ---------------------------------


def _settle(conductor: Conductor, task: TaskRecord, voters: list[TaskRecord]) -> None:
    """Count the round's accepted answers, break a tie by the plan's policy, review."""
    meter = conductor.reviewer.trust.meter
    mark = meter.mark()
    outcome = count_votes(conductor, task, voters)
    state = dict(task.data.get(QUORUM_DATA) or {})
    state["outcome"] = outcome
    data = {**task.data, QUORUM_DATA: state}
    judged = meter.since(mark)  # a tie-break judge's calls are this task's spend
    if judged is not None:
        data = budget.log_extra(data, "judge", judged, int(state["round"]))
    conductor.store.transition(
        conductor.team,
        task.task_id,
        epoch=conductor.epoch(),
        expect=["queued"],
        to="running",
        version=task.version,
        attempt=int(state["round"]),
        data=data,
        reason=f"quorum round {state['round']} counted",
    )
    retire(conductor, voters)
    _review(conductor, conductor.store.get_task(conductor.team, task.task_id))


def _review(conductor: Conductor, task: TaskRecord) -> None:
    """Give the task the winning voter's answer (if any) and put it through the ladder."""
    reviewer: Reviewer = conductor.reviewer
    state = task.data.get(QUORUM_DATA) or {}
    outcome = state.get("outcome") or {}
    winner = _winner_result(conductor, outcome.get("winner"))
    epoch = conductor.epoch()
    body: dict[str, Any] = {
        "task_id": task.task_id,
        "idempotency_key": idempotency_key(task.task_id, max(task.attempt, 1)),
        "epoch": epoch,
        "status": "completed",
        "notes": {
            "verified": [f"quorum: {outcome.get('reason', '')}"[:500]],
            "uncertain": list(outcome.get("warnings", [])),
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
    record = conductor.store.transition(
        conductor.team,
        task.task_id,
        epoch=epoch,
        expect=["running"],
        to="review",
        version=task.version,
        result=to_dict(result),
    )
    reviewer.review(record)


def _winner_result(conductor: Conductor, ref: str | None) -> TaskResult | None:
    if not ref:
        return None
    voter_id = ref.split(":", 1)[0]
    try:
        record = conductor.store.get_task(conductor.team, voter_id)
    except TenureError:
        return None
    return TaskResult.model_validate(record.result) if record.result else None
