"""What a leader does while it holds the lease: load, dispatch, supervise, judge.

Every register write goes through ``self.epoch()``, which raises ``LeaseLost``
the moment the leader's own deadline passes, and is fenced by the store as
well. A conductor keeps no state the register does not hold, so a new
leader's conductor carries on exactly where the old one stopped.

The conductor is also the ``LeaderContext`` its hooks receive: they see the
methods that protocol names, and nothing else of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tenure.coord import ANYONE, Credentials, SignatureRefused
from tenure.protocol import Plan, TenureError, idempotency_key, parse_message
from tenure.protocol.envelope import MAX_EPOCH_JUMP, Signature
from tenure.protocol.errors import Conflict, LeaseLost, ProtocolError, StaleEpoch
from tenure.protocol.taskspec import AttemptData
from tenure.roles.leader.hooks import HOLD, Dispatch, Hooks, LeaderHook, Stop
from tenure.roles.leader.review import Judging, Reviewer
from tenure.roles.member.wire import (
    LEADER_QUEUE,
    PROGRESS,
    WORK_CAPABILITY,
    Mailbox,
    envelope_for,
)
from tenure.roles.register import (
    UNSIGNED,
    Register,
    RegisterView,
    Task,
    plan_settled,
    register_plan,
)
from tenure.roles.register.spend import last_worker, stuck_workers
from tenure.store import Member, Store
from tenure.verify import Trust


class Conductor(Judging):
    def __init__(
        self,
        store: Store,
        team: str,
        me: str,
        epoch: Callable[[], int],
        *,
        hooks: Sequence[LeaderHook] = (),
        workdir: Path | None = None,
        stale_grace: float = 2.0,
        duplicate: bool = False,
        trust: Trust | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.me = me
        self._epoch = epoch
        self.workdir = workdir
        self.trust = trust if trust is not None else Trust()
        self.stale_grace = stale_grace
        self.hooks = Hooks(hooks)
        self.credentials = credentials  # the leading role's: signs, and checks signatures
        self.mailbox = Mailbox(store, team, me, duplicate=duplicate, credentials=credentials)
        self.register = Register(store, team, epoch, credentials)
        self.view = RegisterView(store, team, credentials)
        self.reviewer = Reviewer(self, self.hooks)
        self._idle_view: list[Task] | None = None
        self._doubted: dict[str, int] = {}  # members whose reported epoch was not believed

    # --- the context hooks see ----------------------------------------------------------

    def epoch(self) -> int:
        return self._epoch()

    def now(self) -> float:
        return self.store.now()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"leader": self.me, **data}, epoch=self.epoch())

    def tasks(self) -> list[Task]:
        return self.view.tasks()

    def workers(self) -> dict[str, Member]:
        return {
            m.member_id: m
            for m in self.store.members(self.team)
            if WORK_CAPABILITY in m.capabilities
        }

    # --- taking over --------------------------------------------------------------------

    def load(self, plan: Plan | None) -> None:
        """Register the plan's tasks that the register does not hold yet."""
        if plan is None:
            return
        self.hooks.check_options(plan)
        register_plan(self.register, plan, {t.task_id for t in self.view.tasks()})

    def adopt(self) -> None:
        """Rebuild from the register after an election: resend, re-review or requeue."""
        live = self.workers()
        for task in self.view.tasks():
            if task.problem is not None:
                continue  # set aside by the first round (``tick``)
            if task.state == "review":
                self.reviewer.review(task)
            elif task.state in ("running", "queued") and task.assignee:
                if self.hooks.on_takeover(self, task):
                    continue
                if task.assignee in live:
                    info = {"task_id": task.task_id, "assignee": task.assignee}
                    self.event("leader.adopted", {**info, "attempt": task.attempt})
                    self.send(task)
                else:
                    why = f"worker {task.assignee} left while the leader changed"
                    self.reviewer.retry(task, "failed", why)

    # --- one round ----------------------------------------------------------------------

    def tick(self) -> bool:
        """One round of results, supervision and dispatch; True if anything happened."""
        self.epoch()  # a leader past its own deadline stops here, before any action
        busy = self.drain()
        tasks = self.view.tasks()  # the register, re-reading only what changed
        if self._set_aside(tasks) or self.supervise(tasks):
            busy, tasks = True, self.view.tasks()
        if self.hooks.on_tick(self, tasks):
            busy, tasks = True, self.view.tasks()
        busy |= self.dispatch_ready(tasks)
        self._idle_view = None if busy else tasks
        return busy

    def drain(self, batch: int = 32) -> bool:
        deliveries = self.store.receive(
            self.team, LEADER_QUEUE, consumer=self.me, visibility_timeout=10.0, max_messages=batch
        )
        for delivery in deliveries:
            self.epoch()  # a leader past its deadline handles nothing more
            try:
                self._on_message(delivery.payload)
            except (LeaseLost, StaleEpoch):
                raise  # unacked: the next leader gets this message
            except TenureError as exc:
                self.event("leader.bad_message", {"id": delivery.message_id, "error": str(exc)})
            self.store.ack(self.team, LEADER_QUEUE, delivery.message_id)
        return bool(deliveries)

    def _on_message(self, payload: dict[str, Any]) -> None:
        message = parse_message(payload)
        if message.type == "task.result":
            self.reviewer.on_result(message.body, sender=message.sender)
        elif message.type == "task.progress":
            body = message.body
            if not self._from_assignee(PROGRESS, body, body.task_id, body.signature):
                return
            self.event(
                "task.progress",
                {
                    "task_id": body.task_id,
                    "attempt": body.attempt,
                    "message": body.message,
                    "criteria": len(body.acceptance_criteria),
                },
            )

    def _from_assignee(
        self, kind: str, body: Any, task_id: str, signature: Signature | None
    ) -> bool:
        """True if ``body`` is signed by the member its task is assigned to (or the
        team is unsigned). A forged signature is a security event naming the claimed
        signer; a member's genuine word about an attempt no longer its own is ignored."""
        if self.credentials is None:
            return True
        try:
            signer = self.credentials.verify(kind, body, signature, by=ANYONE)
        except SignatureRefused as exc:
            refused = {"task_id": task_id, "kind": kind, "claimed": exc.claimed, "reason": str(exc)}
            self.event(f"security.{kind}_refused", refused)
            return False
        return signer == self.register.get(task_id).assignee

    def _set_aside(self, tasks: list[Task]) -> bool:
        """A register entry that cannot be read is never acted on: it goes to a person."""
        acted = False
        for task in tasks:
            if task.problem is None or task.state not in ("queued", "running", "review"):
                continue
            forged = task.problem.startswith(UNSIGNED)
            try:
                if task.state == "review" and not forged:
                    self.reviewer.review(task)  # a failed verdict says why
                else:
                    self.reviewer.block(task, f"cannot build its envelope: {task.problem}")
            except Conflict:
                continue
            kind = "security.task_refused" if forged else "leader.unreadable_task"
            self.event(kind, {"task_id": task.task_id, "error": task.problem})
            acted = True
        return acted

    def supervise(self, tasks: list[Task] | None = None) -> bool:
        """Requeue attempts whose worker went silent or whose deadline passed."""
        self._check_members_epochs()
        now, live, acted = self.now(), self.workers(), False
        for task in self.view.tasks() if tasks is None else tasks:
            if task.state not in ("queued", "running") or not task.assignee or task.problem:
                continue
            watch = self.hooks.on_watch(self, task, now)
            if watch == "moved":
                acted = True
                continue
            deadline = task.spec.deadline_seconds + self.stale_grace
            started = task.data.dispatched_at or task.updated_at
            if task.assignee not in live and watch != "waiting":
                why = f"worker {task.assignee} stopped heartbeating"
            elif now - started > deadline:  # the attempt's deadline holds across stand-ins
                why = f"deadline of {deadline - self.stale_grace:g}s exceeded"
            else:
                continue
            self.reviewer.retry(task, "failed", why)
            acted = True
        return acted

    def _check_members_epochs(self) -> None:
        """A member that has seen a higher epoch than ours means the store forgot
        (e.g. a Redis restart): our authority is stale, step down and claim above it.
        A report far beyond any epoch this team can have reached is not believed: a
        member cannot push its team's epochs toward the end of their space."""
        epoch = self.epoch()
        believed = []
        for member in self.store.members(self.team):
            if member.highest_epoch > epoch + MAX_EPOCH_JUMP:
                self._implausible(member.member_id, member.highest_epoch)
            else:
                believed.append(member.highest_epoch)
        highest = max(believed, default=0)
        if highest > epoch:
            raise StaleEpoch(self.team, epoch, highest)

    def _implausible(self, member: str, reported: int) -> None:
        if self._doubted.get(member) != reported:
            self._doubted[member] = reported
            self.event("security.epoch_refused", {"member": member, "reported": reported})

    def dispatch_ready(self, tasks: list[Task] | None = None) -> bool:
        """Send every queued task whose dependencies are done to an idle worker."""
        tasks = self.view.tasks() if tasks is None else tasks
        done = {t.task_id for t in tasks if t.state == "done"}
        workers = self.workers()
        load = dict.fromkeys(workers, 0)
        for t in tasks:
            if t.state in ("queued", "running") and t.assignee in load:
                load[t.assignee] += 1
        stuck = stuck_workers(tasks)
        sent = False
        for task in tasks:
            if not any(n < 1 for n in load.values()):
                break  # every worker is busy: nothing more can be dispatched this round
            if task.state != "queued" or task.assignee or task.problem:
                continue
            if not set(task.spec.depends_on) <= done:
                continue
            admission = self.hooks.before_dispatch(self, task)
            if admission == HOLD:
                continue
            if isinstance(admission, Stop):
                self.reviewer.fail(task, admission.reason)
                continue
            worker = self._pick(task, workers, load, stuck)
            if worker is not None and self.dispatch(task, worker):
                load[worker] += 1
                sent = True
        return sent

    def finished(self) -> bool:
        """True when no task can make progress without a person (``plan_settled``) and
        no hook has work left to do for a settled register."""
        # the register as the last round saw it, when that round changed nothing
        tasks = self._idle_view if self._idle_view is not None else self.view.tasks()
        return plan_settled(tasks) and not self.hooks.on_settled(self, tasks)

    # --- sending ------------------------------------------------------------------------

    def dispatch(self, task: Task, worker: str, data: AttemptData | None = None) -> bool:
        """A new attempt of queued ``task``, assigned to ``worker``, and its envelope sent."""
        base = (data or task.data).with_(
            dispatched_at=self.now(), dispatched_seq=self.store.last_event_seq(self.team)
        )
        plan = Dispatch(task, worker, base, new=True)
        self.hooks.on_dispatch(self, plan)
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
        self.hooks.on_dispatch(self, plan)
        self._send(task, plan)

    def _send(self, task: Task, plan: Dispatch) -> None:
        deps = {}
        for dep in task.spec.depends_on:
            result = self.store.get_task(self.team, dep).result or {}
            deps[dep] = result.get("artifact")
        try:
            envelope = envelope_for(
                task,
                epoch=self.epoch(),
                assignee=plan.worker,
                dependencies=deps,
                budget=plan.budget,
                extra_input=plan.input,
            )
        except ProtocolError as exc:  # a register entry no worker could be sent
            self.reviewer.block(task, f"cannot build its envelope: {exc}")
            return
        self.mailbox.assign(envelope)
        key = idempotency_key(task.task_id, task.attempt)
        self.event(
            "task.dispatched", {"task_id": task.task_id, "assignee": plan.worker, "key": key}
        )

    def _pick(
        self, task: Task, workers: dict[str, Member], load: dict[str, int], stuck: set[str]
    ) -> str | None:
        """An idle worker able to do ``task``. A retry goes to another worker than the one
        that ran the last attempt, and any attempt to a worker not still busy with an
        attempt the leader gave up on (``stuck``), while such a worker is idle; then by
        priority."""
        need = task.spec.capability
        idle = [
            m
            for m in workers.values()
            if load[m.member_id] == 0 and (need is None or need in m.capabilities)
        ]
        if not idle:
            return None
        last = last_worker(task)

        def rank(m: Member) -> tuple[bool, bool, int, str]:
            return (m.member_id == last, m.member_id in stuck, -m.priority, m.member_id)

        return min(idle, key=rank).member_id
