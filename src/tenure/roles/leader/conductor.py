"""What a leader does while it holds the lease: load, dispatch, supervise, judge.

Every register write goes through ``self.epoch()``, which raises ``LeaseLost``
the moment the leader's own deadline passes, and is fenced by the store as
well. A conductor keeps no state the register does not hold, so a new
leader's conductor carries on exactly where the old one stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenure.protocol import Plan, TenureError, idempotency_key, parse_message
from tenure.protocol.errors import Conflict, LeaseLost, ProtocolError, StaleEpoch
from tenure.roles.features import budget
from tenure.roles.features.nested.parent import (
    SILENT_GRACE_FACTOR,
    SubLeaders,
    dispatch_data,
    stood_in,
)
from tenure.roles.features.quorum import hook as quorum
from tenure.roles.features.split import settle_splits
from tenure.roles.leader.review import Reviewer
from tenure.roles.member.wire import LEADER_QUEUE, WORK_CAPABILITY, Mailbox, envelope_for
from tenure.roles.register.plan import plan_settled, plan_spec
from tenure.roles.register.view import RegisterView
from tenure.store import Member, Store, TaskRecord
from tenure.verify import Trust


class Conductor:
    def __init__(
        self,
        store: Store,
        team: str,
        me: str,
        epoch: Callable[[], int],
        *,
        workdir: Path | None = None,
        stale_grace: float = 2.0,
        duplicate: bool = False,
        splitter: Any = None,
        trust: Trust | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.me = me
        self.epoch = epoch
        self.stale_grace = stale_grace
        self.mailbox = Mailbox(store, team, me, duplicate=duplicate)
        self._idle_view: list[TaskRecord] | None = None
        self.view = RegisterView(store, team)
        self.reviewer = Reviewer(
            store, team, epoch, workdir=workdir, on_event=self.event, splitter=splitter, trust=trust
        )
        self.sub_leaders = SubLeaders(
            store, team, epoch, self.event, grace=SILENT_GRACE_FACTOR * stale_grace
        )

    # --- taking over ------------------------------------------------------------------

    def load(self, plan: Plan | None) -> None:
        """Register the plan's tasks that the register does not hold yet."""
        if plan is None:
            return
        known = {t.task_id for t in self.store.tasks(self.team)}
        for task in plan.tasks:
            if task.id not in known:
                try:
                    self.store.create_task(
                        self.team, task.id, epoch=self.epoch(), spec=plan_spec(plan, task)
                    )
                except Conflict:
                    continue  # registered by a racing leader a moment ago

    def adopt(self) -> None:
        """Rebuild from the register after an election: resend, re-review or requeue."""
        live = self._workers()
        for task in self.store.tasks(self.team):
            if task.state == "review":
                self.reviewer.review(task)
            elif task.state in ("running", "queued") and task.assignee:
                if task.assignee in live:
                    self.event(
                        "leader.adopted",
                        {
                            "task_id": task.task_id,
                            "assignee": task.assignee,
                            "attempt": task.attempt,
                        },
                    )
                    if not stood_in(task):  # a stand-in sub-leader reports by itself
                        self._send(task, task.assignee)
                elif task.state == "running" and task.spec.get("team"):
                    continue  # a composite task: supervise follows its child team's lease
                else:
                    self.reviewer.retry(
                        task, "failed", f"worker {task.assignee} left while the leader changed"
                    )

    # --- one round ----------------------------------------------------------------------

    def tick(self) -> bool:
        """One round of results, supervision and dispatch; True if anything happened."""
        self.epoch()  # a leader past its own deadline stops here, before any action
        busy = self.drain()
        tasks = self.view.tasks()  # the register, re-reading only what changed
        if self.supervise(tasks):
            busy, tasks = True, self.view.tasks()
        if any(quorum.held_back(t) for t in tasks) and quorum.tick(self):
            busy, tasks = True, self.view.tasks()
        busy |= self.dispatch(tasks)
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
            self.event(
                "task.progress",
                {
                    "task_id": body.task_id,
                    "attempt": body.attempt,
                    "message": body.message,
                    "criteria": len(body.acceptance_criteria),
                },
            )

    def supervise(self, tasks: list[TaskRecord] | None = None) -> bool:
        """Requeue attempts whose worker went silent or whose deadline passed."""
        self._check_members_epochs()
        now, live, acted = self.store.now(), self._workers(), False
        for task in self.store.tasks(self.team) if tasks is None else tasks:
            if task.state not in ("queued", "running") or not task.assignee:
                continue
            deadline = task.spec.get("deadline_seconds", 300.0) + self.stale_grace
            started = float(task.data.get("dispatched_at", task.updated_at))
            step = self.sub_leaders.follow(task, live, now)  # None unless composite
            if step == "moved":
                acted = True
                continue
            if task.assignee not in live and step != "waiting":
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
        (e.g. a Redis restart): our authority is stale, step down and claim above it."""
        epoch = self.epoch()
        highest = max((m.highest_epoch for m in self.store.members(self.team)), default=0)
        if highest > epoch:
            raise StaleEpoch(self.team, epoch, highest)

    def dispatch(self, tasks: list[TaskRecord] | None = None) -> bool:
        if tasks is None:
            tasks = self.store.tasks(self.team)
        settled = settle_splits(self.store, self.team, self.reviewer, tasks)
        if settled:  # a split parent finished or stopped: read the register again
            tasks = self.store.tasks(self.team)
        done = {t.task_id for t in tasks if t.state == "done"}
        workers = self._workers()
        load = dict.fromkeys(workers, 0)
        for t in tasks:
            if t.state in ("queued", "running") and t.assignee in load:
                load[t.assignee] += 1
        sent, now = False, self.store.now()  # one clock read per round (a round trip on Redis)
        for task in tasks:
            if not any(n < 1 for n in load.values()):
                break  # every worker is busy: nothing more can be dispatched this round
            if (
                task.state != "queued"
                or task.assignee
                or task.data.get("split_into")  # waits for its split tasks instead
                or quorum.held_back(task)  # quorum rounds are dispatched by roles.quorum
                or not set(task.spec.get("depends_on", [])) <= done
            ):
                continue
            stop = budget.stop_reason(task, tasks, now)
            if stop:
                self.reviewer.fail(task, stop)
                continue
            worker = self._pick(task, workers, load)
            if worker is None:
                continue
            attempt = task.attempt + 1
            data = {**task.data, "dispatched_at": now}
            if task.spec.get("team"):
                dispatch_data(self.store, self.team, task, data)
            record = self.store.transition(
                self.team,
                task.task_id,
                epoch=self.epoch(),
                expect=["queued"],
                to="queued",
                version=task.version,
                assignee=worker,
                attempt=attempt,
                data=data,
            )
            self._send(record, worker)
            load[worker] += 1
            sent = True
        return sent

    def finished(self) -> bool:
        """True when no task can make progress without a person (``plan_settled``)."""
        # the register as the last round saw it, when that round changed nothing
        tasks = self._idle_view if self._idle_view is not None else self.store.tasks(self.team)
        return plan_settled(tasks)

    # --- helpers -------------------------------------------------------------------------

    def _pick(
        self, task: TaskRecord, workers: dict[str, Member], load: dict[str, int]
    ) -> str | None:
        need = task.spec.get("capability")
        idle = [
            m
            for m in workers.values()
            if load[m.member_id] == 0 and (need is None or need in m.capabilities)
        ]
        if not idle:
            return None
        return min(idle, key=lambda m: (-m.priority, m.member_id)).member_id

    def _send(self, task: TaskRecord, worker: str) -> None:
        deps = {}
        for dep in task.spec.get("depends_on", []):
            result = self.store.get_task(self.team, dep).result or {}
            deps[dep] = result.get("artifact")
        left = None
        if task.spec.get("budget") or task.spec.get("team_budget"):
            left = budget.remaining(task, self.store.tasks(self.team), self.store.now())
        try:
            envelope = envelope_for(
                task, epoch=self.epoch(), assignee=worker, dependencies=deps, budget=left
            )
        except ProtocolError as exc:  # a register entry no worker could be sent
            self.reviewer.block(task, f"cannot build its envelope: {exc}")
            return
        self.mailbox.assign(envelope)
        self.event(
            "task.dispatched",
            {
                "task_id": task.task_id,
                "assignee": worker,
                "key": idempotency_key(task.task_id, task.attempt),
            },
        )

    def _workers(self) -> dict[str, Member]:
        return {
            m.member_id: m
            for m in self.store.members(self.team)
            if WORK_CAPABILITY in m.capabilities
        }

    def event(self, kind: str, data: dict[str, Any]) -> None:
        epoch = self.epoch()
        self.store.append_event(self.team, kind, {"leader": self.me, **data}, epoch=epoch)
