"""The leader's dispatch: which queued task goes to which free slot, its attempt
written to the register and its envelope sent to the worker.

``Dispatching`` is mixed into the ``Conductor``, which holds the register, the view,
the mailbox and the hooks named below; it is a module of its own so that a change to
how work is handed out has one place to go.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from tenure.protocol import idempotency_key
from tenure.protocol.errors import Conflict, NotFound, ProtocolError
from tenure.protocol.taskspec import AttemptData
from tenure.roles.leader.hooks import HOLD, Dispatch, Hooks, Leading, Stop
from tenure.roles.leader.review import Reviewer
from tenure.roles.member.wire import Mailbox, envelope_for
from tenure.roles.register import Register, RegisterView, Task
from tenure.roles.register.spend import last_worker, stuck_workers
from tenure.store import Member
from tenure.store.staged import StagedStore, Unstageable
from tenure.store.writes import Write


class Dispatching:
    """Hands queued tasks to workers with a free slot; the ``Conductor`` provides the
    state and the methods declared here."""

    hooks: Hooks
    view: RegisterView
    register: Register
    mailbox: Mailbox
    reviewer: Reviewer

    @property
    def leading(self) -> Leading:
        """The leader as its hooks are handed it."""
        raise NotImplementedError

    def epoch(self) -> int:
        raise NotImplementedError

    def now(self) -> float:
        raise NotImplementedError

    def event(self, kind: str, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def workers(self) -> dict[str, Member]:
        raise NotImplementedError

    def staging(self, tasks: Sequence[Task] = ()) -> AbstractContextManager[StagedStore]:
        raise NotImplementedError

    def commit_staging(self, staged: StagedStore, *more: Write) -> None:
        raise NotImplementedError

    def dispatch_ready(self, tasks: list[Task] | None = None) -> bool:
        """Send every queued task whose dependencies are done to a worker with a free
        slot. A worker runs up to its ``slots`` attempts at once; each attempt the
        register holds as its own (queued or running: sent, its result not in yet)
        fills one, so a worker is never sent more than it has slots for.

        The round's dispatches — each attempt's write, envelope and event — go in one
        commit when every hook keeps to the store; a refused commit (a task changed
        meanwhile) wrote nothing, and they go again one call at a time."""
        tasks = self.view.tasks() if tasks is None else tasks
        if not self.hooks.stageable:
            return self._dispatch_ready(tasks)
        try:
            with self.staging([t for t in tasks if t.state == "queued"]) as staged:
                sent = self._dispatch_ready(tasks)
            if staged.writes:
                self.commit_staging(staged)
        except (Conflict, NotFound, Unstageable):
            return self._dispatch_ready(self.view.tasks())
        return sent

    def _dispatch_ready(self, tasks: list[Task]) -> bool:
        done = {t.task_id for t in tasks if t.is_done}
        workers = self.workers()
        load = dict.fromkeys(workers, 0)
        for t in tasks:
            if t.state in ("queued", "running") and t.assignee in load:
                load[t.assignee] += 1
        stuck = stuck_workers(tasks)
        sent = False
        for task in tasks:
            if all(load[w] >= m.slots for w, m in workers.items()):
                break  # every slot is taken: nothing more can be dispatched this round
            if task.state != "queued" or task.assignee or task.problem:
                continue
            if not set(task.spec.depends_on) <= done:
                continue
            admission = self.hooks.before_dispatch(self.leading, task)
            if admission == HOLD:
                continue
            if isinstance(admission, Stop):
                self.reviewer.fail(task, admission.reason, by=admission.by)
                continue
            worker = self._pick(task, workers, load, stuck)
            if worker is not None and self.dispatch(task, worker):
                load[worker] += 1
                sent = True
        return sent

    def dispatch(self, task: Task, worker: str, data: AttemptData | None = None) -> bool:
        """A new attempt of queued ``task``, assigned to ``worker``, and its envelope sent."""
        # the view has read the log this far: the attempt's own events all come later
        base = (data or task.data).with_(dispatched_at=self.now(), dispatched_seq=self.view.seq)
        plan = Dispatch(task, worker, base, new=True)
        self.hooks.on_dispatch(self.leading, plan)
        try:
            record = self.register.move(
                task, "queued", assignee=worker, attempt=task.attempt + 1, data=plan.data
            )
        except Conflict:
            return False  # changed under us (a racing leader): the next round sees it
        self._send(record, plan)
        return True

    def send(self, task: Task) -> None:
        """(Re)send the envelope of the task's current attempt to its assignee."""
        assert task.assignee is not None
        plan = Dispatch(task, task.assignee, task.data, new=False)
        self.hooks.on_dispatch(self.leading, plan)
        self._send(task, plan)

    def _send(self, task: Task, plan: Dispatch) -> None:
        try:
            deps = {}
            for dep in task.spec.depends_on:  # as the view has it (read if not), checked
                known = self.view.get(dep)
                done = known if known is not None else self.register.get(dep)
                if not done.is_done:
                    raise ProtocolError(f"depends_on.{dep}", f"done, not {done.problem or done.state}")
                deps[dep] = (done.result or {}).get("artifact")
            envelope = envelope_for(
                task,
                epoch=self.epoch(),
                assignee=plan.worker,
                dependencies=deps,
                budget=plan.budget,
                extra_input=plan.input,
            )
            self.mailbox.assign(envelope)
        except ProtocolError as exc:
            # a register entry no worker could be sent, or an envelope over the body
            # limit (its dependencies' artifacts, say): it goes to a person
            self.reviewer.block(task, f"cannot build its envelope: {exc}")
            return
        key = idempotency_key(task.task_id, task.attempt)
        self.event(
            "task.dispatched", {"task_id": task.task_id, "assignee": plan.worker, "key": key}
        )

    def _pick(
        self, task: Task, workers: dict[str, Member], load: dict[str, int], stuck: set[str]
    ) -> str | None:
        """A worker with a free slot able to do ``task``. A retry goes to another worker
        than the one that ran the last attempt, and any attempt to a worker not still busy
        with an attempt the leader gave up on (``stuck``), while such a worker has room;
        then by priority, then to the one with the fewest attempts in hand."""
        need = task.spec.capability
        room = [
            m
            for m in workers.values()
            if load[m.member_id] < m.slots and (need is None or need in m.capabilities)
        ]
        if not room:
            return None
        last = last_worker(task)

        def rank(m: Member) -> tuple[bool, bool, int, int, str]:
            held = load[m.member_id]
            return (m.member_id == last, m.member_id in stuck, -m.priority, held, m.member_id)

        return min(room, key=rank).member_id
