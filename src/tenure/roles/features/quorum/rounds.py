"""Quorum rounds: voter tasks registered, sent one per worker, retired or cancelled.

Each voter is an ordinary task (its own attempts, idempotency keys, ladder and
retries); this module only creates them and chooses their workers, keeping the
voters of one round on distinct workers while the team has enough.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.protocol.errors import Conflict
from tenure.protocol.ids import MAX_ID_LENGTH
from tenure.roles.features import budget
from tenure.roles.leader.ladder import QUORUM_DATA, REPLICA_OF
from tenure.roles.member.wire import WORK_CAPABILITY
from tenure.store import TaskRecord

if TYPE_CHECKING:
    from tenure.roles.leader.conductor import Conductor

VOTER_CHECKS = ("schema", "evidence", "judge")


def replica_id(task_id: str, round_: int, voter: int) -> str:
    return f"{task_id}.q{round_}.v{voter}"


def start_round(conductor: Conductor, task: TaskRecord, tasks: list[TaskRecord], n: int) -> bool:
    """Open the next round of ``n`` voters, unless the task's budget or id length forbids it."""
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
    ensure_voters(conductor, record, state, {})
    conductor.event(
        "quorum.round",
        {"task_id": task.task_id, "round": round_, "voters": ids},
    )
    return True


def ensure_voters(
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


def retire(conductor: Conductor, voters: list[TaskRecord]) -> None:
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


def cancel_open(
    conductor: Conductor, task: TaskRecord, state: dict[str, Any], by_id: dict[str, TaskRecord]
) -> bool:
    """Cancel the voters still open once their task is over (cancelled, failed or done)."""
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


def dispatch_voters(conductor: Conductor) -> bool:
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
