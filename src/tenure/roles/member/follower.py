"""A follower: joins a team, takes envelopes, executes each attempt once, reports.

It obeys no envelope below the highest epoch it has seen (kept on disk), and
marks a task running only through a fenced compare-and-set, so a stale
leader's assignment is refused twice over: by the follower and by the store.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenure.coord import LEAD, Credentials, EpochMemory, SignatureRefused, run_effect
from tenure.executors import (
    Executor,
    TaskContext,
)
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, TenureError, parse_message
from tenure.protocol.messages import TaskProgress
from tenure.roles.member.attempt import AttemptRunner, choose_executor
from tenure.roles.member.heartbeat import MemberHeartbeat
from tenure.roles.member.wire import ENVELOPE, WORK_CAPABILITY, Mailbox, member_queue
from tenure.store import Delivery, Store


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
        self.heartbeat = MemberHeartbeat(
            store,
            config.team,
            self.me,
            ttl=config.member_ttl,
            priority=config.priority,
            capabilities=(WORK_CAPABILITY, *config.capabilities),
            memory=self.memory,
        )
        self.current: TaskEnvelope | None = None
        self.cancelled = threading.Event()
        self.runner = AttemptRunner(
            store, config.team, self.me, claim_margin=config.visibility_timeout
        )

    # --- loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self.heartbeat.start(on_beat=self._watch_cancel)
        try:
            while not stop.is_set():
                if not self.poll_once():
                    stop.wait(self.config.poll_interval)
        finally:
            self.heartbeat.stop(leave=True)

    def poll_once(self) -> bool:
        """Handle at most one delivery; True if there was one."""
        try:
            deliveries = self.store.receive(
                self.team,
                member_queue(self.me),
                consumer=self.me,
                visibility_timeout=self.config.visibility_timeout,
            )
        except TenureError as exc:
            self._event("follower.store_error", {"error": str(exc)})
            return False
        for delivery in deliveries:
            self.handle(delivery)
        return bool(deliveries)

    def handle(self, delivery: Delivery) -> None:
        """Never raises: a malformed or refused message is logged and acked."""
        try:
            message = parse_message(delivery.payload)
            if message.type == "task.assign":
                self._on_assign(message.body)
            elif message.type != "task.cancel":
                self._event("follower.unexpected_message", {"type": message.type})
        except ProtocolError as exc:
            self._event("follower.bad_message", {"id": delivery.message_id, "error": str(exc)})
        except TenureError as exc:
            self._event("follower.error", {"id": delivery.message_id, "error": str(exc)})
            return  # not acked: it comes back after the visibility timeout
        self.store.ack(self.team, delivery.queue, delivery.message_id)

    # --- one envelope ------------------------------------------------------------------

    def _on_assign(self, env: TaskEnvelope) -> None:
        info = {"task_id": env.task_id, "key": env.idempotency_key, "epoch": env.epoch}
        refused = self._refusal(env)
        if refused is not None:  # never executed, and its epoch is not remembered either
            self._event("security.envelope_refused", {**info, **refused})
            return
        if not self.memory.observe(env.epoch):
            self._event("follower.stale_envelope_ignored", {**info, "highest": self.memory.highest})
            return
        executor = _Attended(self, self._executor_for(env))
        ran = self.runner.run(env, executor, self._context(env))
        if ran.kind != "executed":
            self._event(f"follower.{_SAID[ran.kind]}", {**info, **ran.facts})
        if ran.result is not None:
            self.mailbox.result(env.reply_to, ran.result)

    def _context(self, env: TaskEnvelope) -> TaskContext:
        self.cancelled = threading.Event()
        return TaskContext(
            worker_id=self.me,
            team=self.team,
            workdir=self.config.workdir,
            cancelled=self.cancelled,
            envelope=env,
            report_progress=lambda msg, frac: self.progress(env, msg, frac),
            run_effect=self._task_effect(env),
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

    def _task_effect(self, env: TaskEnvelope) -> Any:
        def effect(key: str, fn: Any) -> Any:
            return run_effect(
                self.store,
                self.team,
                key,
                fn,
                epoch=env.epoch,
                holder=self.me,
                claim_seconds=env.deadline_seconds,
                wait_seconds=env.deadline_seconds,
            )

        return effect

    def progress(self, env: TaskEnvelope, message: str, fraction: float | None) -> None:
        body = TaskProgress(
            task_id=env.task_id,
            idempotency_key=env.idempotency_key,
            attempt=env.attempt,
            message=message,
            fraction_done=fraction,
            acceptance_criteria=env.acceptance_criteria,
        )
        try:
            self.mailbox.progress(env.reply_to, env.epoch, body)
        except TenureError as exc:
            self._event("follower.store_error", {"error": str(exc)})

    def cancel_current(self) -> None:
        """Stop the attempt in hand, if any (its executor sees ``ctx.cancelled``)."""
        if self.current is not None:
            self.cancelled.set()

    def _watch_cancel(self) -> None:
        """Stop the attempt in hand once the register no longer holds it as this
        member's: cancelled, or given up on by the leader (a deadline, a replan)."""
        env = self.current
        if env is None:
            return
        try:
            task = self.store.get_task(self.team, env.task_id)
        except TenureError:
            return  # the next beat looks again
        ours = (task.attempt, task.assignee) == (env.attempt, self.me)
        if task.state not in ("queued", "running") or not ours:
            self.cancelled.set()

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
}


class _Attended:
    """The executor, run with the follower attending: it knows the envelope in hand
    (for cancellation and for stand-ins, which lead only while idle) and sends a
    check-in restating the criteria every ``checkin_interval`` seconds."""

    def __init__(self, follower: Follower, inner: Executor) -> None:
        self.follower = follower
        self.inner = inner

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        follower = self.follower
        checkin = _Checkin(
            follower.config.checkin_interval,
            lambda: follower.progress(envelope, "still working", None),
        )
        follower.current = envelope
        checkin.start()
        try:
            return self.inner.execute(envelope, ctx)
        finally:
            checkin.stop()
            follower.current = None


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
