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

from tenure.coord import EpochMemory
from tenure.executors import Executor, TaskContext, failed, resolve_executor, safe_result
from tenure.protocol import ProtocolError, TaskEnvelope, TenureError, parse_message, to_dict
from tenure.protocol.errors import Conflict, EffectInProgress, NotFound, StaleEpoch
from tenure.protocol.messages import TaskProgress
from tenure.roles.member.heartbeat import MemberHeartbeat
from tenure.roles.member.wire import WORK_CAPABILITY, Mailbox, member_queue
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


class Follower:
    def __init__(self, store: Store, config: FollowerConfig, executor: Executor) -> None:
        self.store = store
        self.config = config
        self.executor = executor
        self.team = config.team
        self.me = config.member_id
        self.memory = EpochMemory.for_member(config.state_dir, config.team, config.member_id)
        self.mailbox = Mailbox(store, config.team, self.me, duplicate=config.duplicate_results)
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
        self.executed = 0

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
        if not self.memory.observe(env.epoch):
            self._event("follower.stale_envelope_ignored", {**info, "highest": self.memory.highest})
            return
        recorded = self.store.effect_lookup(self.team, env.idempotency_key)
        if recorded is not None:
            self._event("follower.duplicate_absorbed", info)
            self.mailbox.result(env.reply_to, recorded.result)
            return
        if not self._mark_running(env, info):
            return
        try:
            ticket = self.store.effect_begin(
                self.team,
                env.idempotency_key,
                epoch=env.epoch,
                holder=self.me,
                claim_seconds=env.deadline_seconds + self.config.visibility_timeout,
            )
        except StaleEpoch as exc:
            self._event("follower.fenced", {**info, "current": exc.current})
            return
        except EffectInProgress as exc:
            self._event("follower.attempt_in_progress", {**info, "error": str(exc)})
            return
        result = ticket.result if ticket.status == "done" else self._execute(env)
        self.mailbox.result(env.reply_to, result)

    def _mark_running(self, env: TaskEnvelope, info: dict[str, Any]) -> bool:
        try:
            task = self.store.get_task(self.team, env.task_id)
            if (task.attempt, task.assignee) != (env.attempt, self.me) or task.state not in (
                "queued",
                "running",
            ):
                self._event(
                    "follower.assignment_outdated",
                    {
                        **info,
                        "state": task.state,
                        "attempt": task.attempt,
                        "assignee": task.assignee,
                    },
                )
                return False
            self.store.transition(
                self.team,
                env.task_id,
                epoch=env.epoch,
                expect=[task.state],
                to="running",
                version=task.version,
            )
        except StaleEpoch as exc:
            self._event("follower.fenced", {**info, "current": exc.current})
            return False
        except (Conflict, NotFound) as exc:
            self._event("follower.assignment_outdated", {**info, "error": str(exc)})
            return False
        return True

    def _execute(self, env: TaskEnvelope) -> dict[str, Any]:
        self.current, self.cancelled = env, threading.Event()
        ctx = TaskContext(
            worker_id=self.me,
            team=self.team,
            workdir=self.config.workdir,
            cancelled=self.cancelled,
            envelope=env,
            report_progress=lambda msg, frac: self._progress(env, msg, frac),
            run_effect=self._task_effect(env),
            record_event=lambda kind, data: self._event(kind, data),
        )
        checkin = _Checkin(
            self.config.checkin_interval, lambda: self._progress(env, "still working", None)
        )
        checkin.start()
        try:
            executor = self._executor_for(env)
            result = (
                safe_result(env, lambda: executor.execute(env, ctx))
                if executor
                else failed(env, f"unknown executor {env.executor!r}")
            )
        finally:
            checkin.stop()
            self.current = None
        self.executed += 1
        ticket = self.store.effect_finish(
            self.team, env.idempotency_key, holder=self.me, result=to_dict(result)
        )
        return dict(ticket.result)

    def _executor_for(self, env: TaskEnvelope) -> Executor | None:
        if not env.executor:
            return self.executor
        try:
            return resolve_executor(env.executor)
        except ProtocolError:
            return None

    def _task_effect(self, env: TaskEnvelope) -> Any:
        from tenure.coord import run_effect

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

    def _progress(self, env: TaskEnvelope, message: str, fraction: float | None) -> None:
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

    def _watch_cancel(self) -> None:
        env = self.current
        if env is None:
            return
        try:
            if self.store.get_task(self.team, env.task_id).state == "cancelled":
                self.cancelled.set()
        except TenureError:
            pass  # the next beat looks again

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        try:
            self.store.append_event(self.team, kind, {"member": self.me, **data})
        except TenureError:
            pass  # the event log is best effort when the store is down


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
