"""Putting a plan's tasks into the shared queue of ``queue`` mode: each attempt one
signed envelope addressed to whoever takes it. A plan is checked whole first, against
the leader features a queue worker's review runs (there is no leader to run others)."""

from __future__ import annotations

from tenure.coord import Credentials
from tenure.protocol import Plan, ProtocolError
from tenure.protocol.errors import Conflict, NotFound
from tenure.protocol.secrets import pinned
from tenure.protocol.taskspec import spec_for
from tenure.roles.features import BudgetHook
from tenure.roles.leader import Hooks, LeaderHook
from tenure.roles.leader.replan import ReplanHook
from tenure.roles.member import WORK_QUEUE, Mailbox, envelope_for
from tenure.roles.register import Register, Task
from tenure.roles.register.revision import Revision, last_number, plan_digest, record_revision
from tenure.store import Store
from tenure.store.staged import StagedStore, Unstageable

QUEUE_EPOCH = 1
SEND_BATCH = 200
"""Envelopes per ``send_many``: a batch is one script (Redis) or one transaction
(SQLite) that others wait behind, so a big plan goes out in several."""


def queue_hooks() -> list[LeaderHook]:
    """The leader features a queue worker's review runs: a replan's decisions, budgets."""
    return [ReplanHook(), BudgetHook()]


def check_queue_plan(plan: Plan) -> None:
    """Refuse, with one line, a plan queue mode cannot run: a dependency (no leader
    orders the work), or an option none of the queue's features reads."""
    for index, task in enumerate(plan.tasks):
        if task.depends_on:
            raise ProtocolError(
                f"tasks[{index}].depends_on",
                "no dependencies in queue mode; use team or local mode",
            )
    Hooks(queue_hooks()).check_options(plan)


def enqueue_plan(
    store: Store, plan: Plan, *, sender: str = "operator", credentials: Credentials | None = None
) -> int:
    """Register and enqueue every task of a plan, and send a new attempt of each known
    task the register holds as queued (an answered one); dependencies are refused here.
    With the leading role's ``credentials`` the tasks and their envelopes are signed.
    A plan queue mode cannot run is refused before anything is written."""
    check_queue_plan(plan)
    register = Register(store, plan.team, lambda: QUEUE_EPOCH, credentials, queue=True)
    mailbox = Mailbox(store, plan.team, sender, credentials=credentials)
    first = last_number(store, plan.team) == 0
    registered = {t.task_id: t for t in register.tasks()}
    with pinned():  # the known secrets, read once for the plan, not per write
        # registered whole first (all or none); then a new attempt of each that is
        # queued: new, re-queued by `tenure answer`, or registered by a load cut short
        fresh = [(t.id, spec_for(plan, t)) for t in plan.tasks if t.id not in registered]
        registered.update((t.task_id, t) for t in register.create_all(fresh))
        if any(t.id not in registered for t in plan.tasks):  # registered meanwhile
            registered = {t.task_id: t for t in register.tasks()}
        queued = [registered[t.id] for t in plan.tasks if registered[t.id].state == "queued"]
        enqueue_attempts(register, mailbox, queued)
    if first:  # the team's first plan: its digest tells a re-run from a changed plan
        revision = Revision(
            revision=1, digest=plan_digest(plan), reason="first plan", by=sender, at=store.now()
        )
        record_revision(store, plan.team, revision, epoch=QUEUE_EPOCH)
    return len(queued)


def enqueue_attempt(register: Register, mailbox: Mailbox, task: Task) -> None:
    """A new attempt of a queued task, into the shared queue."""
    enqueue_attempts(register, mailbox, [task])


def enqueue_attempts(register: Register, mailbox: Mailbox, tasks: list[Task]) -> None:
    """A new attempt of each queued task, into the shared queue: for each batch of
    ``SEND_BATCH`` tasks, the write that counts each attempt and the envelopes, in one
    commit (one round trip, all or nothing). A task another process moved meanwhile
    makes the batch go again one task at a time, each as it stands then."""
    for start in range(0, len(tasks), SEND_BATCH):
        batch = tasks[start : start + SEND_BATCH]
        staged = StagedStore(register.store, tasks=[task.record for task in batch])
        try:
            _attempts(register.on(staged), mailbox.on(staged), batch)
            staged.commit_staged(register.team)
        except (Conflict, NotFound, Unstageable):
            for task in batch:
                _attempts(register, mailbox, [register.get(task.task_id)])


def _attempts(register: Register, mailbox: Mailbox, tasks: list[Task]) -> None:
    moved = [
        register.move(task, "queued", attempt=task.attempt + 1, assignee=None)
        for task in tasks
        if task.state == "queued" and not task.assignee
    ]
    if moved:
        mailbox.assign_many(
            [envelope_for(task, epoch=QUEUE_EPOCH, assignee=WORK_QUEUE) for task in moved]
        )
