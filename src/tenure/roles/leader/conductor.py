"""What a leader does while it holds the lease: load, dispatch, supervise, judge.

Every register write goes through ``self.epoch()``, which raises ``LeaseLost``
the moment the leader's own deadline passes, and is fenced by the store as
well. A conductor keeps no state the register does not hold, so a new
leader's conductor carries on exactly where the old one stopped.

Its hooks never see the conductor itself: each gets a ``HookContext`` of it, which
hands on the methods the ``LeaderContext`` protocol names and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tenure.coord import ANYONE, Credentials, SignatureRefused
from tenure.executors.paths import check_task_paths
from tenure.protocol import Message, Plan, TenureError
from tenure.protocol.envelope import MAX_EPOCH_JUMP, Signature
from tenure.protocol.errors import Conflict, LeaseLost, ProtocolError, StaleEpoch
from tenure.protocol.secrets import pinned
from tenure.roles.leader.dispatching import Dispatching
from tenure.roles.leader.guard import Guard
from tenure.roles.leader.hooks import Hooks, LeaderHook, Leading, judged_in_store
from tenure.roles.leader.replan import ReplanHook, take_request
from tenure.roles.leader.review import Judging, Reviewer
from tenure.roles.member.wire import (
    LEADER_QUEUE,
    PROGRESS,
    WORK_CAPABILITY,
    Mailbox,
    crash_line,
    give_back,
    read_delivery,
)
from tenure.roles.register import (
    UNSIGNED,
    Register,
    RegisterView,
    Task,
    plan_settled,
    read_task,
    register_plan,
)
from tenure.roles.register.resign import sign_again
from tenure.roles.register.revision import (
    Revision,
    interrupted_fresh,
    last_number,
    latest_revision,
    pending_request,
    plan_digest,
    record_revision,
)
from tenure.store import Delivery, Member, Store, TaskRecord
from tenure.store.staged import StagedStore
from tenure.store.writes import Ack, Write
from tenure.verify import Trust

REPLAN_LOOK = 0.2  # seconds between looks for a replan request
CLOCK_READ = 1.0  # seconds between reads of the store's clock


class Conductor(Dispatching, Judging):
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
        self.hooks = Hooks([ReplanHook(), *hooks])
        self.credentials = credentials  # the leading role's: signs, and checks signatures
        self.mailbox = Mailbox(store, team, me, duplicate=duplicate, credentials=credentials)
        self.view = RegisterView(store, team, credentials)
        self.register = Register(store, team, epoch, credentials, written=self.view.note)
        self._clock: tuple[float, float] | None = None  # (store clock, monotonic) when read
        self._clock_store = store  # the store itself, even while a block is staged
        self._workers: dict[str, Member] | None = None  # the live workers, this round
        self._members: list[Member] | None = None  # the live members, this round
        self.reviewer = Reviewer(self, self.hooks)
        self.guard = Guard()  # records the team did not seal, members without a key
        self._idle_view: list[Task] | None = None
        self._doubted: dict[str, int] = {}  # members whose reported epoch was not believed
        self._revision = 0  # the last plan revision this leader knows settled
        self._replan_looked = float("-inf")

    # --- the context hooks see ----------------------------------------------------------

    @property
    def leading(self) -> Leading:
        return self

    def epoch(self) -> int:
        return self._epoch()

    def now(self) -> float:
        """The store's clock, read at most every ``CLOCK_READ`` seconds and carried on
        from there: dispatches, verdicts and deadlines cost no round trip each for the
        time (a lease is never judged by it: the store does that by its own clock).
        A store whose clock is local (SQLite, memory, a test's manual clock) is read
        every time: that costs nothing, and a test that moves the clock sees it move."""
        if not self._clock_store.clock_is_remote():
            return self._clock_store.now()
        if self._clock is None or time.monotonic() - self._clock[1] > CLOCK_READ:
            self._clock = (self._clock_store.now(), time.monotonic())
        return self._clock[0] + (time.monotonic() - self._clock[1])

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"leader": self.me, **data}, epoch=self.epoch())

    def tasks(self) -> list[Task]:
        return self.view.tasks()

    def workers(self) -> dict[str, Member]:
        """Live members that take work (signed: only those the team has a key for), read
        once a round."""
        if self._workers is None:
            live = {m.member_id: m for m in self.members() if WORK_CAPABILITY in m.capabilities}
            self._workers = self.guard.keyed(self, live)
        return dict(self._workers)

    def members(self) -> list[Member]:
        """The team's live members, read once a round."""
        if self._members is None:
            self._members = self.store.members(self.team)
        return list(self._members)

    # --- taking over --------------------------------------------------------------------

    def load(self, plan: Plan | None) -> None:
        """Register the plan's tasks that the register does not hold yet, and record it as
        the team's first revision. A plan older than the store's revision (a leader started
        with the plan file a replan has since changed) registers nothing: the store's wins."""
        self._revision = last_number(self.store, self.team)
        self._sign_again(plan)
        if plan is None:
            return
        self.hooks.check_options(plan)
        if interrupted_fresh(self.store, self.team) is not None:
            self.event("leader.plan_superseded", {"why": "a fresh start is unfinished"})
            return
        latest = latest_revision(self.store, self.team)
        digest = plan_digest(plan)
        if latest is not None and latest.digest != digest:
            self.event("leader.plan_superseded", {"revision": latest.revision})
            return
        created = register_plan(self.register, plan, {t.task_id for t in self.view.tasks()})
        if latest is None and self._revision == 0:
            first = Revision(
                revision=1,
                digest=digest,
                reason="first plan",
                by=self.me,
                at=self.now(),
                added=[t.task_id for t in created],
            )
            record_revision(self.store, self.team, first, epoch=self.epoch())
            self._revision = 1

    def _sign_again(self, plan: Plan | None) -> None:
        """What the team wrote that the current lead key does not cover (a rotated key,
        a run without keys of this very plan), signed anew before anything is judged."""
        if self.credentials is None:
            return
        latest = latest_revision(self.store, self.team)
        if plan is not None and latest is not None and latest.digest != plan_digest(plan):
            plan = None  # not the team's plan any more: nothing is adopted by it
        again = sign_again(self.register, plan, holder=self.me)
        if again.rotated or again.adopted:
            said = {"rotated": again.rotated, "adopted": again.adopted}
            self.event("security.register_resigned", said)

    def take_replan(self) -> bool:
        """Apply a pending replan request before anything is dispatched; True if one was.
        Looked for at most every ``REPLAN_LOOK`` seconds (a ledger read)."""
        now = time.monotonic()
        if now - self._replan_looked < REPLAN_LOOK:
            return False
        self._replan_looked = now
        request = pending_request(self.store, self.team, self._revision)
        if request is None:
            return False
        take_request(self, request, credentials=self.credentials, check=self._check_plan)
        self._revision = request.revision
        return True

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

    def _check_plan(self, plan: Plan) -> None:
        """What a new plan must pass here, as a plan a leader starts with does."""
        self.hooks.check_options(plan)
        check_task_paths(plan.tasks, self.workdir)  # scopes and outputs inside it

    # --- one round ----------------------------------------------------------------------

    def tick(self, wait: float = 0.0) -> bool:
        """One round of results, supervision and dispatch; True if anything happened.
        With ``wait`` the round first waits up to that long for a message (a result)
        when none is there yet: an idle leader wakes when one comes."""
        self._workers = self._members = None  # the members are read again, once, this round
        with pinned():  # the known secrets, read once a round, not for every write
            return self._round(wait)

    def _round(self, wait: float) -> bool:
        self.epoch()  # a leader past its own deadline stops here, before any action
        busy = self.take_replan()  # dispatch waits for a pending goal shift
        drained = self.drain(wait=0.0 if busy else wait)  # the view is read when it drains
        busy |= drained
        tasks = self.view.known() if drained else self.view.tasks()  # what others changed
        # the leader's own writes from here on are noted in the view as they are made
        if self._set_aside(tasks) or self.supervise(tasks):
            busy, tasks = True, self.view.known()
        if self.hooks.on_tick(self, tasks):
            busy, tasks = True, self.view.known()
        busy |= self.dispatch_ready(tasks)
        self._idle_view = None if busy else tasks
        return busy

    def drain(self, batch: int = 32, *, wait: float = 0.0) -> bool:
        deliveries = self.store.receive(
            self.team,
            LEADER_QUEUE,
            consumer=self.me,
            visibility_timeout=10.0,
            max_messages=batch,
            wait=wait,
        )
        if deliveries:
            self.view.tasks()  # what the workers changed since (a result's task, running)
        at_once: list[tuple[Message, Delivery]] = []
        for delivery in deliveries:
            self.epoch()  # a leader past its deadline handles nothing more
            try:
                message = read_delivery(delivery)
            except ProtocolError as exc:  # given back: dead-lettered after max deliveries
                info = {"id": delivery.message_id, "deliveries": delivery.delivery_count}
                self.event("leader.bad_message", {**info, "error": str(exc)[:2000]})
                give_back(self.store, self.team, delivery)
                continue
            if self._judged_in_store(message):
                at_once.append((message, delivery))
            else:
                self._handle(message, delivery)
        if at_once and not self._judge_at_once(at_once):
            for message, delivery in at_once:
                self._handle(message, delivery)
        return bool(deliveries)

    def _handle(self, message: Message, delivery: Delivery) -> None:
        """One message, then its ack (none when it could not be handled: it comes back)."""
        try:
            self._on_message(message)
        except (LeaseLost, StaleEpoch):
            raise  # unacked: the next leader gets this message
        except TenureError as exc:
            self.event("leader.bad_message", {"id": delivery.message_id, "error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - a bug must not end the leader's term
            info = {"id": delivery.message_id, "error": crash_line(exc)}
            self.event("leader.message_error", info)
            return  # not acked: after max deliveries it is dead-lettered
        self.store.ack(self.team, LEADER_QUEUE, delivery.message_id)

    def _judged_in_store(self, message: Message) -> bool:
        """A result whose judgement cannot reach past the store (``judged_in_store``)."""
        if message.type != "task.result":
            return False
        task = self.view.get(message.body.task_id)
        return task is not None and judged_in_store(task, self.hooks)

    def _judge_at_once(self, results: list[tuple[Message, Delivery]]) -> bool:
        """Judge results with every write they make and their acks in one commit; True if
        they were. A refused commit wrote nothing (a task changed meanwhile), and a result
        that cannot be judged here stops the lot: they are then judged one at a time."""
        tasks = [self.view.get(m.body.task_id) for m, _ in results if m.type == "task.result"]
        try:
            with self.staging([t for t in tasks if t is not None]) as staged:
                for message, _ in results:
                    self._on_message(message)
            acks = [Ack(LEADER_QUEUE, delivery.message_id) for _, delivery in results]
            self.commit_staging(staged, *acks)
        except (LeaseLost, StaleEpoch):
            raise
        except Exception:  # noqa: BLE001 - nothing was written: each is judged again, alone
            return False
        return True

    @contextmanager
    def staging(self, tasks: Sequence[Task] = ()) -> Iterator[StagedStore]:
        """The leader writing to a ``StagedStore`` in this block (its register, mailbox
        and log, as its hooks see them too): ``commit_staging`` then makes the writes at once."""
        real = (self.store, self.register, self.mailbox)
        staged = StagedStore(real[0], now=self.now, tasks=[t.record for t in tasks])
        self.store, self.register, self.mailbox = staged, real[1].on(staged), real[2].on(staged)
        try:
            yield staged
        finally:
            self.store, self.register, self.mailbox = real

    def commit_staging(self, staged: StagedStore, *more: Write) -> None:
        """Make a staged block's writes; the view learns the tasks as written."""
        for answer in staged.commit_staged(self.team, *more):
            if isinstance(answer, TaskRecord):
                self.view.note(read_task(answer, self.credentials))

    def _on_message(self, message: Message) -> None:
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
            if task.tamper is not None:  # its last write was not the team's
                acted |= self.guard.put_right(self, task)
                continue
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
        """Requeue attempts whose worker went silent or whose deadline passed. Called
        on its own (no ``tasks``, outside a round) it reads the register and the
        members afresh."""
        if tasks is None:
            self._workers = self._members = None
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
        for member in self.members():
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

    def finished(self) -> bool:
        """True when no task can make progress without a person (``plan_settled``), no
        hook has work left to do for a settled register, and no replan is waiting."""
        # the register as the last round saw it, when that round changed nothing
        tasks = self._idle_view if self._idle_view is not None else self.view.tasks()
        if not plan_settled(tasks) or self.hooks.on_settled(self, tasks):
            return False
        return pending_request(self.store, self.team, self._revision) is None  # new work?
