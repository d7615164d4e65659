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
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.protocol import TaskResult, TenureError, idempotency_key, to_dict
from tenure.protocol.errors import Conflict
from tenure.protocol.ids import MAX_ID_LENGTH
from tenure.roles import budget
from tenure.roles.verdicts import QUORUM_DATA, REPLICA_OF, quorum_check, trust_of
from tenure.roles.wire import WORK_CAPABILITY
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
    from tenure.roles.conductor import Conductor
    from tenure.roles.review import Reviewer

SETTLED = ("done", "blocked", "failed", "cancelled")
VOTER_CHECKS = ("schema", "evidence", "judge")


def replica_id(task_id: str, round_: int, voter: int) -> str:
    return f"{task_id}.q{round_}.v{voter}"


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
                    acted |= _start_round(conductor, task, tasks, check.n)
                else:
                    acted |= _ensure_voters(conductor, task, state, by_id)
                    voters = [by_id.get(v) for v in state.get("replicas", [])]
                    if voters and all(v is not None and v.state in SETTLED for v in voters):
                        _settle(conductor, task, [v for v in voters if v is not None])
                        acted = True
            elif task.state == "running" and not task.assignee and state.get("outcome"):
                _review(conductor, task)  # a leader stopped between settling and reviewing
                acted = True
            elif task.state in ("cancelled", "failed", "done"):
                acted |= _cancel_open(conductor, task, state, by_id)
        except Conflict:
            continue  # changed under us (a racing leader); the next round sees it
    acted |= _dispatch(conductor)
    return acted


# --- rounds ---------------------------------------------------------------------------


def _start_round(conductor: Conductor, task: TaskRecord, tasks: list[TaskRecord], n: int) -> bool:
    reviewer = conductor.reviewer
    stop = budget.stop_reason(task, tasks, conductor.store.now())
    if stop:
        reviewer.fail(task, stop)
        return True
    round_ = task.attempt + 1
    ids = [replica_id(task.task_id, round_, i) for i in range(1, n + 1)]
    if len(ids[-1]) > MAX_ID_LENGTH:
        reviewer.block(
            task,
            f"quorum: the voter ids of {task.task_id!r} would exceed {MAX_ID_LENGTH} characters; "
            "shorten the task id",
        )
        return True
    state = {"round": round_, "replicas": ids}
    record = conductor.store.transition(
        conductor.team,
        task.task_id,
        epoch=conductor.epoch(),
        expect=["queued"],
        to="queued",
        version=task.version,
        data={**task.data, QUORUM_DATA: state},
        reason=f"quorum round {round_}: {n} independent executions ({', '.join(ids)})",
    )
    _ensure_voters(conductor, record, state, {})
    conductor.event(
        "quorum.round",
        {"task_id": task.task_id, "round": round_, "voters": ids},
    )
    return True


def _ensure_voters(
    conductor: Conductor,
    task: TaskRecord,
    state: dict[str, Any],
    by_id: dict[str, TaskRecord],
) -> bool:
    """Register the round's voters that the register does not hold yet."""
    created = False
    checks = [c for c in task.spec.get("checks", []) if c.get("kind") in VOTER_CHECKS]
    for index, voter_id in enumerate(state.get("replicas", []), 1):
        if voter_id in by_id:
            continue
        spec = {
            **task.spec,
            "checks": checks,
            REPLICA_OF: task.task_id,
            "round": state["round"],
            "voter": index,
        }
        spec.pop("policies", None)
        try:
            record = conductor.store.create_task(
                conductor.team, voter_id, epoch=conductor.epoch(), spec=spec
            )
        except Conflict:
            continue
        data = {k: task.data[k] for k in ("history", "qa") if task.data.get(k)}
        if data:
            conductor.store.transition(
                conductor.team,
                voter_id,
                epoch=conductor.epoch(),
                expect=["queued"],
                to="queued",
                version=record.version,
                data=data,
            )
        created = True
    return created


def _settle(conductor: Conductor, task: TaskRecord, voters: list[TaskRecord]) -> None:
    """Count the round's accepted answers, break a tie by the plan's policy, review."""
    check = quorum_check(task.spec)
    assert check is not None
    trust = trust_of(conductor.reviewer)
    candidates = [_candidate(v) for v in voters if v.state == "done" and v.result]
    missing = [f"{v.task_id} ({v.state})" for v in voters if v.state != "done"]
    state = dict(task.data.get(QUORUM_DATA) or {})
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
            _tie_break(conductor, task, check.decision, candidates, count.reason, outcome)
    state["outcome"] = outcome
    conductor.store.transition(
        conductor.team,
        task.task_id,
        epoch=conductor.epoch(),
        expect=["queued"],
        to="running",
        version=task.version,
        attempt=int(state["round"]),
        data={**task.data, QUORUM_DATA: state},
        reason=f"quorum round {state['round']} counted",
    )
    _retire(conductor, voters)
    _review(conductor, conductor.store.get_task(conductor.team, task.task_id))


def _tie_break(
    conductor: Conductor,
    task: TaskRecord,
    decision: str | None,
    candidates: list[Candidate],
    why: str,
    outcome: dict[str, Any],
) -> None:
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


def _candidate(voter: TaskRecord) -> Candidate:
    result = TaskResult.model_validate(voter.result)
    who = voter.data.get("voter") or {}
    return Candidate.from_result(
        result,
        member=who.get("member") or voter.assignee,
        roles=tuple(who.get("roles", ())),
    )


def _retire(conductor: Conductor, voters: list[TaskRecord]) -> None:
    """Voters that did not make it (blocked, failed) leave the inbox: the round is over."""
    for voter in voters:
        if voter.state in ("blocked", "failed"):
            try:
                conductor.store.transition(
                    conductor.team,
                    voter.task_id,
                    epoch=conductor.epoch(),
                    expect=[voter.state],
                    to="cancelled",
                    version=voter.version,
                    reason=f"its quorum round was counted without it ({voter.state})",
                )
            except Conflict:
                continue


def _cancel_open(
    conductor: Conductor, task: TaskRecord, state: dict[str, Any], by_id: dict[str, TaskRecord]
) -> bool:
    acted = False
    for voter_id in state.get("replicas", []):
        voter = by_id.get(voter_id)
        if voter is None or voter.state in ("done", "cancelled"):
            continue
        try:
            conductor.store.transition(
                conductor.team,
                voter_id,
                epoch=conductor.epoch(),
                expect=[voter.state],
                to="cancelled",
                version=voter.version,
                reason=f"{task.task_id} is {task.state}",
            )
            acted = True
        except Conflict:
            continue
    return acted


# --- dispatch: one voter per worker ----------------------------------------------------


def _dispatch(conductor: Conductor) -> bool:
    """Send queued voters to idle workers, never two voters of a round to one worker
    while the team has enough workers to keep them apart."""
    store = conductor.store
    tasks = store.tasks(conductor.team)
    workers = conductor._workers()
    load = dict.fromkeys(workers, 0)
    for t in tasks:
        if t.state in ("queued", "running") and t.assignee in load:
            load[t.assignee] += 1
    sent = False
    for voter in tasks:
        parent = voter.spec.get(REPLICA_OF)
        if not parent or voter.state != "queued" or voter.assignee or voter.data.get("split_into"):
            continue
        need = voter.spec.get("capability")
        able = [m for m in workers.values() if need is None or need in m.capabilities]
        siblings = {
            (t.data.get("voter") or {}).get("member") or t.assignee
            for t in tasks
            if t.spec.get(REPLICA_OF) == parent
            and t.spec.get("round") == voter.spec.get("round")
            and t.task_id != voter.task_id
        }
        idle = [m for m in able if load[m.member_id] == 0]
        fresh = [m for m in idle if m.member_id not in siblings]
        rounds = sum(
            1
            for t in tasks
            if t.spec.get(REPLICA_OF) == parent and t.spec.get("round") == voter.spec.get("round")
        )
        if not fresh and len(able) >= rounds:
            continue  # enough workers to keep the voters apart: wait for one
        pick = fresh or idle
        if not pick:
            continue
        stop = budget.stop_reason(voter, tasks, store.now())
        if stop:
            conductor.reviewer.fail(voter, stop)
            continue
        member = min(pick, key=lambda m: (-m.priority, m.member_id))
        roles = [c for c in member.capabilities if c != WORK_CAPABILITY]
        data = {
            **voter.data,
            "dispatched_at": store.now(),
            "voter": {"member": member.member_id, "roles": roles},
        }
        try:
            record = store.transition(
                conductor.team,
                voter.task_id,
                epoch=conductor.epoch(),
                expect=["queued"],
                to="queued",
                version=voter.version,
                assignee=member.member_id,
                attempt=voter.attempt + 1,
                data=data,
            )
        except Conflict:
            continue
        conductor._send(record, member.member_id)
        load[member.member_id] += 1
        sent = True
    return sent
