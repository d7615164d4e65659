"""A follower: joins a team, takes envelopes, executes each attempt once, reports.

It obeys no envelope below the highest epoch it has seen (kept on disk), and
marks a task running only through a fenced compare-and-set, so a stale
leader's assignment is refused twice over: by the follower and by the store.

With ``concurrency`` N it holds up to N envelopes at once, one per slot
(``roles.member.slots``): it takes a message only when a slot is free, says its
free slots in each heartbeat, and gives each attempt its own fencing check,
effect claim, deadline and ``ctx.cancelled``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tenure.coord import LEAD, Credentials, EpochMemory, SignatureRefused
from tenure.executors import (
    Executor,
    TaskContext,
)
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, TenureError
from tenure.protocol.codec import translate
from tenure.protocol.errors import MemberIdTaken, StoreLost
from tenure.protocol.messages import TaskProgress
from tenure.protocol.secrets import pinned
from tenure.roles.member.attempt import AttemptRunner, choose_executor, effect_runner
from tenure.roles.member.heartbeat import MemberHeartbeat
from tenure.roles.member.slots import InHand, KeyGate, Slots, cancelled_on
from tenure.roles.member.wire import (
    ENVELOPE,
    RECEIVE_WAIT,
    WORK_CAPABILITY,
    Mailbox,
    crash_line,
    give_back,
    member_queue,
    read_delivery,
)
from tenure.store import Delivery, Store
from tenure.store.writes import Ack

PROGRESS_LIMIT = 4000
"""Characters of a check-in's message that are sent; the rest is dropped."""


@dataclass
class FollowerConfig:
    team: str
    member_id: str
    priority: int = 0
    capabilities: tuple[str, ...] = ()
    member_ttl: float = 3.0
    poll_interval: float = 0.02
    visibility_timeout: float = 30.0
    checkin_interval: float = 5.0
    state_dir: Path | None = None
    workdir: Path | None = None
    duplicate_results: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    credentials: Credentials | None = None  # None: unsigned (one process, or --insecure)
    allowed_executors: tuple[str, ...] = ()  # what an envelope may ask for instead of its own
    await_id: bool = False
    """Wait for the id to be free instead of refusing to start: a team inside one process
    that resumes a run its crashed predecessor had (same ids) waits out their heartbeats."""
    concurrency: int = 1
    """How many envelopes it runs at once, each in a slot of its own (a thread, when more
    than one): 1 for an agent CLI in a worktree; more (8 to 64) for model calls, which
    spend their time waiting on the network."""



class Follower:
    def __init__(self, store: Store, config: FollowerConfig, executor: Executor) -> None:
        self.store = store
        self.config = config
        self.executor = executor
        self.team = config.team
        self.me = config.member_id
        self.memory = EpochMemory.for_member(config.state_dir, config.team, config.member_id)
        self.mailbox = Mailbox(
            store,
            config.team,
            self.me,
            duplicate=config.duplicate_results,
            credentials=config.credentials,
        )
        self.slots = Slots(config.concurrency, name=f"tenure-slot-{self.me}")
        self.in_hand = InHand()  # the attempts executing, each with its own cancel event
        self.gate = KeyGate()
        self.heartbeat = MemberHeartbeat(
            store,
            config.team,
            self.me,
            ttl=config.member_ttl,
            priority=config.priority,
            capabilities=(WORK_CAPABILITY, *config.capabilities),
            memory=self.memory,
            on_lost=self.cancel_current,
            slots=config.concurrency,
            free=lambda: self.slots.free,
        )
        self.runner = AttemptRunner(
            store,
            config.team,
            self.me,
            claim_margin=config.visibility_timeout,
            credentials=config.credentials,  # its writes to the register carry its seal
        )

    # --- loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Join, then work until ``stop``. ``MemberIdTaken`` when the id is live in
        another process, at the start or (after our heartbeat lapsed) later."""
        if not self._join(stop):
            return
        lost = self.heartbeat.lost
        try:
            with cancelled_on(stop, self.stop_attempts):
                while not stop.is_set() and not lost.is_set():
                    self.slots.check()
                    if not self.slots.free:
                        self.slots.wait_free(self.config.poll_interval)
                        continue
                    started = time.monotonic()  # an empty receive waited; a failed one pauses
                    if not self._take(wait=RECEIVE_WAIT):
                        stop.wait(self.config.poll_interval - (time.monotonic() - started))
                self.slots.join()  # what is in hand ends (a stop or a lost id cancelled it)
        finally:
            self.slots.join()
            self.heartbeat.stop(leave=True)
        if self.heartbeat.taken is not None:
            raise self.heartbeat.taken
        self.slots.check()

    def _join(self, stop: threading.Event) -> bool:
        """Start the heartbeat; with ``await_id``, once the id is free (False: stopped)."""
        while True:
            try:
                self.heartbeat.start(on_beat=self._watch_cancel)
                return True
            except MemberIdTaken as exc:
                if not self.config.await_id:
                    raise
                if stop.wait(min(max(exc.wait, 0.05), self.config.member_ttl)):
                    return False

    def poll_once(self, wait: float = 0.0) -> bool:
        """Take one envelope per free slot (waiting up to ``wait`` seconds for the first)
        and run them to the end; True if any came."""
        took = self._take(wait)
        self.slots.join()
        self.slots.check()
        return took

    @property
    def busy(self) -> bool:
        """True while any slot holds a delivery."""
        return self.slots.free < self.slots.size

    def _take(self, wait: float = 0.0) -> bool:
        """Receive up to one delivery per free slot and start each in one."""
        deliveries = self._receive(self.slots.free, wait)
        for delivery in deliveries:
            self.slots.start(partial(self._handle_pinned, delivery))
        return bool(deliveries)

    def _receive(self, room: int, wait: float) -> list[Delivery]:
        try:
            return self.store.receive(
                self.team,
                member_queue(self.me),
                consumer=self.me,
                visibility_timeout=self.config.visibility_timeout,
                max_messages=room,
                wait=wait,
            )
        except StoreLost:
            raise  # the team's store is gone: this member stops
        except TenureError as exc:
            self._event("follower.store_error", {"error": str(exc)})
            return []

    def _handle_pinned(self, delivery: Delivery) -> None:
        with pinned():  # the known secrets, read once a message rather than once a write
            self.handle(delivery)

    def handle(self, delivery: Delivery) -> None:
        """Never raises. A message that cannot be read (undecodable, too large or deep,
        invalid) is logged and given back, to be dead-lettered; a refused one is logged
        and acked."""
        try:
            message = read_delivery(delivery)
        except ProtocolError as exc:
            info = {"id": delivery.message_id, "deliveries": delivery.delivery_count}
            self._event("follower.bad_message", {**info, "error": str(exc)[:2000]})
            give_back(self.store, self.team, delivery)
            return
        try:
            if message.type == "task.assign":
                if self._on_assign(message.body, delivery):
                    return  # acked with the result, in one commit
            elif message.type != "task.cancel":
                self._event("follower.unexpected_message", {"type": message.type})
        except ProtocolError as exc:
            self._event("follower.bad_message", {"id": delivery.message_id, "error": str(exc)})
        except TenureError as exc:
            self._event("follower.error", {"id": delivery.message_id, "error": str(exc)})
            return  # not acked: it comes back after the visibility timeout
        except Exception as exc:  # noqa: BLE001 - a bug must not stop the member
            self._event("follower.error", {"id": delivery.message_id, "error": crash_line(exc)})
            return  # not acked: after max deliveries it is dead-lettered, not retried forever
        self.store.ack(self.team, delivery.queue, delivery.message_id)

    # --- one envelope ------------------------------------------------------------------

    def _on_assign(self, env: TaskEnvelope, delivery: Delivery) -> bool:
        """Run an envelope and report its result; True if the delivery was acked with it
        (an executed attempt's record, report and ack are one commit)."""
        info = {"task_id": env.task_id, "key": env.idempotency_key, "epoch": env.epoch}
        refused = self._refusal(env)
        if refused is not None:  # never executed, and its epoch is not remembered either
            self._event("security.envelope_refused", {**info, **refused})
            return False
        if not self.memory.observe(env.epoch):
            self._event("follower.stale_envelope_ignored", {**info, "highest": self.memory.highest})
            return False
        with self.gate.only(env.idempotency_key):  # a second copy waits, then replays
            executor = _Attended(self, self._executor_for(env))
            ran = self.runner.run(env, executor, self._context(env), record=False)
            if ran.kind != "executed":
                self._event(f"follower.{_SAID[ran.kind]}", {**info, **ran.facts})
                if ran.result is not None:
                    self.mailbox.result(env.reply_to, ran.result)
                return False
            assert ran.result is not None
            staged = self.runner.staged(ran)
            result = self.runner.record(staged, env, ran.result)
            self.mailbox.on(staged).result(env.reply_to, result)
            staged.commit_staged(self.team, Ack(delivery.queue, delivery.message_id))
            return True

    def _context(self, env: TaskEnvelope) -> TaskContext:
        return TaskContext(
            worker_id=self.me,
            team=self.team,
            workdir=self.config.workdir,
            cancelled=threading.Event(),  # this attempt's own
            envelope=env,
            report_progress=lambda msg, frac: self.progress(env, msg, frac),
            run_effect=effect_runner(self.store, self.team, self.me, env),
            record_event=lambda kind, data: self._event(kind, data),
        )

    @property
    def executed(self) -> int:
        return self.runner.executed

    def _refusal(self, env: TaskEnvelope) -> dict[str, Any] | None:
        """Why an envelope must not be obeyed: not signed by the team's leadership."""
        credentials = self.config.credentials
        if credentials is None:
            return None
        try:
            credentials.verify(ENVELOPE, env, env.signature, by=LEAD)
        except SignatureRefused as exc:
            return {"claimed": exc.claimed, "reason": str(exc)}
        return None

    def _executor_for(self, env: TaskEnvelope) -> Executor:
        def refused(spec: str) -> None:
            self._refused_executor(env.task_id, spec)

        return choose_executor(env, self.executor, self.config.allowed_executors, refused)

    def _refused_executor(self, task_id: str, spec: str) -> None:
        self._event("security.executor_refused", {"task_id": task_id, "executor": spec[:200]})

    def progress(self, env: TaskEnvelope, message: str, fraction: float | None) -> None:
        """A check-in; never raises into the executor. A long message keeps its first
        ``PROGRESS_LIMIT`` characters; a check-in that cannot be sent is logged."""
        try:
            body = TaskProgress.model_validate(
                {
                    "task_id": env.task_id,
                    "idempotency_key": env.idempotency_key,
                    "attempt": env.attempt,
                    "message": str(message)[:PROGRESS_LIMIT],
                    "fraction_done": fraction,
                    "acceptance_criteria": env.acceptance_criteria,
                }
            )
            self.mailbox.progress(env.reply_to, env.epoch, body)
        except ValidationError as exc:
            self._event("follower.bad_progress", {"error": str(translate(exc, source="progress"))})
        except TenureError as exc:
            self._event("follower.store_error", {"error": str(exc)})

    def cancel_current(self) -> None:
        """Stop every attempt in hand (each executor sees its ``ctx.cancelled``)."""
        self.in_hand.cancel_all()

    def stop_attempts(self) -> None:
        """This member stops: every attempt in hand is cancelled, and one that then ends
        without completing is released (``AttemptRunner``), not reported as failed."""
        self.runner.stopping.set()
        self.in_hand.cancel_all()

    def _watch_cancel(self) -> None:
        """Stop each attempt in hand once the register no longer holds it as this
        member's: cancelled, or given up on by the leader (a deadline, a replan)."""
        for env in self.in_hand.envelopes():
            try:
                task = self.store.get_task(self.team, env.task_id)
            except TenureError:
                continue  # the next beat looks again
            ours = (task.attempt, task.assignee) == (env.attempt, self.me)
            if task.state not in ("queued", "running") or not ours:
                self.in_hand.cancel(env.idempotency_key)

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        try:
            self.store.append_event(self.team, kind, {"member": self.me, **data})
        except TenureError:
            pass  # the event log is best effort when the store is down


_SAID = {
    "replayed": "duplicate_absorbed",
    "outdated": "assignment_outdated",
    "fenced": "fenced",
    "in_progress": "attempt_in_progress",
    "refused": "attempt_refused",
    "released": "attempt_released",
}


class _Attended:
    """The executor, run with the follower attending: the envelope is in hand while it
    runs (for cancellation) and a check-in restating the criteria goes out every
    ``checkin_interval`` seconds."""

    def __init__(self, follower: Follower, inner: Executor) -> None:
        self.follower = follower
        self.inner = inner

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        follower = self.follower
        checkin = _Checkin(
            follower.config.checkin_interval,
            lambda: follower.progress(envelope, "still working", None),
        )
        if follower.heartbeat.lost.is_set() or follower.runner.stopping.is_set():
            ctx.cancelled.set()  # the id is another process's, or it stops: nothing starts
        with follower.in_hand.holding(envelope, ctx.cancelled):
            checkin.start()
            try:
                return self.inner.execute(envelope, ctx)
            finally:
                checkin.stop()


class _Checkin:
    """Sends a check-in every ``interval`` seconds while a task runs."""

    def __init__(self, interval: float, send: Any) -> None:
        self.interval = interval
        self.send = send
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="tenure-checkin")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Stop and wait, so no check-in can follow the result."""
        self.stopped.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.send()
