"""Quorum rounds: voter tasks registered, sent one per worker, retired or cancelled.

Each voter is an ordinary task (its own attempts, idempotency keys, ladder and
retries); this module only creates them and chooses their workers. The votes of a
round come from distinct workers, always: a voter is never sent to a worker that
holds or gave another vote of its round. A voter that finds no such worker waits
(workers still joining, or busy); when the team has fewer such workers than voters
waiting for longer than the check's ``wait_seconds``, ``shortage`` says why and the
task goes to a person.
"""

from __future__ import annotations

from tenure.protocol import QuorumCheck
from tenure.protocol.errors import Conflict
from tenure.protocol.ids import MAX_ID_LENGTH
from tenure.protocol.taskspec import QuorumState, VoterOf
from tenure.roles.features.budget import exceeded, stop_reason
from tenure.roles.leader import LeaderContext
from tenure.roles.member import WORK_CAPABILITY
from tenure.roles.register import Task
from tenure.roles.register.spend import stuck_workers
from tenure.store import Member

VOTER_CHECKS = ("schema", "evidence", "judge")


def replica_id(task_id: str, round_: int, voter: int) -> str:
    return f"{task_id}.q{round_}.v{voter}"


def start_round(ctx: LeaderContext, task: Task, tasks: list[Task], n: int) -> bool:
    """Open the next round of ``n`` voters, unless the task's budget or id length forbids it."""
    stop = stop_reason(task, tasks, ctx.now())
    if stop:
        exceeded(ctx, task, stop)
        ctx.fail(task, stop)
        return True
    round_ = task.attempt + 1
    ids = [replica_id(task.task_id, round_, i) for i in range(1, n + 1)]
    if len(ids[-1]) > MAX_ID_LENGTH:
        ctx.block(
            task,
            f"quorum: the voter ids of {task.task_id!r} would exceed {MAX_ID_LENGTH} characters; "
            "shorten the task id",
        )
        return True
    state = QuorumState(round=round_, replicas=ids)
    record = ctx.register.move(
        task,
        "queued",
        data=task.data.with_(quorum=state),
        reason=f"quorum round {round_}: {n} independent executions ({', '.join(ids)})",
    )
    ensure_voters(ctx, record, state, {})
    ctx.event("quorum.round", {"task_id": task.task_id, "round": round_, "voters": ids})
    return True


def ensure_voters(
    ctx: LeaderContext, task: Task, state: QuorumState, by_id: dict[str, Task]
) -> bool:
    """Register the round's voters that the register does not hold yet."""
    created = False
    checks = [c for c in task.spec.checks if c.kind in VOTER_CHECKS]
    for index, voter_id in enumerate(state.replicas, 1):
        if voter_id in by_id:
            continue
        spec = task.spec.model_copy(
            update={
                "id": voter_id,
                "checks": checks,
                "replica_of": task.task_id,
                "round": state.round,
                "voter": index,
                "policies": {},
            }
        )
        try:
            record = ctx.register.create(voter_id, spec)
        except Conflict:
            continue
        if task.data.history or task.data.qa:
            data = record.data.with_(history=task.data.history, qa=task.data.qa)
            ctx.register.move(record, "queued", data=data)
        created = True
    return created


def retire(ctx: LeaderContext, voters: list[Task]) -> None:
    """Voters that did not make it (blocked, failed) leave the inbox: the round is over."""
    for voter in voters:
        if voter.state in ("blocked", "failed"):
            try:
                ctx.register.move(
                    voter,
                    "cancelled",
                    reason=f"its quorum round was counted without it ({voter.state})",
                )
            except Conflict:
                continue


def cancel_open(ctx: LeaderContext, task: Task, state: QuorumState, by_id: dict[str, Task]) -> bool:
    """Cancel the voters still open once their task is over (cancelled, failed or done)."""
    acted = False
    for voter_id in state.replicas:
        voter = by_id.get(voter_id)
        if voter is None or voter.state in ("done", "cancelled"):
            continue
        try:
            ctx.register.move(voter, "cancelled", reason=f"{task.task_id} is {task.state}")
            acted = True
        except Conflict:
            continue
    return acted


# --- dispatch: one voter per worker, never two ---------------------------------------


def dispatch_voters(ctx: LeaderContext, tasks: list[Task]) -> bool:
    """Send queued voters to workers with a free slot, never a voter to a worker that holds or gave
    another vote of its round (it waits instead)."""
    workers = ctx.workers()
    load = dict.fromkeys(workers, 0)
    for t in tasks:
        if t.state in ("queued", "running") and t.assignee in load:
            load[t.assignee] += 1
    stuck = stuck_workers(tasks)
    sent = False
    for voter in tasks:
        parent = voter.spec.replica_of
        if not parent or voter.state != "queued" or voter.assignee or voter.data.split_into:
            continue
        member = _voter_member(voter, _round_of(voter, tasks), workers, load, stuck)
        if member is None:
            continue
        stop = stop_reason(voter, tasks, ctx.now())
        if stop:
            exceeded(ctx, voter, stop)
            ctx.fail(voter, stop)
            continue
        roles = [c for c in member.capabilities if c != WORK_CAPABILITY]
        data = voter.data.with_(voter=VoterOf(member=member.member_id, roles=roles))
        if ctx.dispatch(voter, member.member_id, data):
            load[member.member_id] += 1
            sent = True
    return sent


def engaged(round_: list[Task], *, but: str | None = None) -> set[str]:
    """The workers holding or having given a vote of this round (other than ``but``'s):
    a voter assigned, running, in review or done. A voter waiting for a retry holds
    nothing, and one that failed or was cancelled gave no vote."""
    out: set[str] = set()
    for t in round_:
        if t.task_id == but:
            continue
        if t.state == "queued" and t.assignee:
            out.add(t.assignee)
        elif t.state in ("running", "review", "done"):
            member = (t.data.voter.member if t.data.voter else None) or t.assignee
            if member:
                out.add(member)
    return out


def shortage(
    ctx: LeaderContext, task: Task, check: QuorumCheck, state: QuorumState, by_id: dict[str, Task]
) -> str | None:
    """Why the round cannot get distinct workers for its voters: fewer live workers able
    to vote and holding no vote of the round than voters waiting, for longer than the
    check's ``wait_seconds``. None while it can, or may yet (workers still joining)."""
    round_ = [by_id[v] for v in state.replicas if v in by_id]
    waiting = [v for v in round_ if v.state == "queued" and not v.assignee]
    if not waiting:
        return None
    need = task.spec.capability
    able = {m for m, w in ctx.workers().items() if need is None or need in w.capabilities}
    free = able - engaged(round_)
    if len(free) >= len(waiting):
        return None
    waited = ctx.now() - min(v.updated_at for v in waiting)
    if waited < check.wait_seconds:
        return None
    who = f"workers{f' with {need!r}' if need else ''}"
    have = len(able)
    names = f" ({', '.join(sorted(able))})" if able else ""
    return (
        f"quorum needs {check.n} distinct {who} (one vote each), the team has {have}{names}; "
        f"waited {waited:.0f}s (wait_seconds {check.wait_seconds:g}) — start more workers, "
        "then answer to run the round again"
    )


def _round_of(voter: Task, tasks: list[Task]) -> list[Task]:
    return [
        t
        for t in tasks
        if t.spec.replica_of == voter.spec.replica_of and t.spec.round == voter.spec.round
    ]


def _voter_member(
    voter: Task,
    round_: list[Task],
    workers: dict[str, Member],
    load: dict[str, int],
    stuck: set[str],
) -> Member | None:
    """The worker for ``voter``: able, with a free slot, and holding no other vote of its round;
    one not stuck with an attempt the leader gave up on first, then by priority."""
    need = voter.spec.capability
    taken = engaged(round_, but=voter.task_id)
    idle = [
        m
        for m in workers.values()
        if (need is None or need in m.capabilities)
        and load[m.member_id] < m.slots
        and m.member_id not in taken
    ]
    if not idle:
        return None  # wait: for a worker to join, or to finish
    return min(idle, key=lambda m: (m.member_id in stuck, -m.priority, m.member_id))
