"""``queue`` mode: homogeneous work with no leader, on claim-check semantics.

Tasks sit in one shared queue. A worker takes one, and it stays invisible to
others for the visibility timeout; if the worker dies, the task reappears.
Each attempt runs at most once under its idempotency key (the same attempt
runner as a follower's), results are still verified by the ladder (in the
worker process, apart from the executor), and failures are retried as new
attempts with their history. A result recorded by a worker that died before
reviewing it (or while reviewing it) is reviewed by the next worker that takes
the message: no task is left ``running`` by a dead worker. Each worker is a
member with a heartbeat, and what it holds (its message, its claim on the key)
goes back to the queue once that heartbeat lapses, not after the visibility
timeout.

Signed, a worker runs what the register holds, never what a message says: it takes
the task id and attempt from the message, builds the envelope from the register's
task (its spec signed by the team's lead key, its record sealed by a key of the
team), and refuses a message whose content differs (``security.envelope_refused``).

With ``concurrency`` N a worker takes up to N messages at a time (one per free
slot, ``roles.member.slots``), runs them at once, and acks each once its review
is done. A lapsed or lost heartbeat cancels every attempt it has in hand.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from tenure import observe
from tenure.coord import ANYONE, Credentials, EpochMemory, SignatureRefused
from tenure.executors import Executor, TaskContext
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, TenureError
from tenure.protocol.errors import Conflict, NotFound, StaleEpoch, StoreLost
from tenure.protocol.secrets import pinned
from tenure.roles.leader.hooks import judged_in_store
from tenure.roles.member import (
    WORK_CAPABILITY,
    WORK_QUEUE,
    AttemptRunner,
    Mailbox,
    MemberHeartbeat,
)
from tenure.roles.member.attempt import Ran, Vet, choose_executor, effect_runner
from tenure.roles.member.slots import InHand, KeyGate, Slots, cancelled_on
from tenure.roles.member.wire import (
    ENVELOPE,
    RECEIVE_WAIT,
    crash_line,
    envelope_for,
    give_back,
    read_delivery,
)
from tenure.roles.teams.queue_plan import QUEUE_EPOCH, enqueue_attempt, enqueue_plan
from tenure.roles.teams.queue_review import QueueReview, differing
from tenure.store import Delivery, Store, TaskRecord
from tenure.store.staged import Unstageable
from tenure.store.writes import Ack
from tenure.verify import Trust

__all__ = ["QUEUE_EPOCH", "QueueWorker", "enqueue_attempt", "enqueue_plan"]


Said = Literal["ack", "acked", "keep"]
"""What becomes of a work message: ack it, already acked (with its result), keep it."""


@dataclass
class QueueWorker:
    store: Store
    team: str
    member_id: str
    executor: Executor
    visibility_timeout: float = 330.0
    """Keep it above the longest task deadline: a claim lasts for the attempt's
    deadline, so a message that reappears sooner finds a live worker's claim and
    counts a delivery toward dead-lettering for nothing. A dead worker's message
    does not wait for it: it comes back once the worker's heartbeat lapses."""
    poll_interval: float = 0.02
    workdir: Path | None = None
    trust: Trust | None = None
    credentials: Credentials | None = None  # this member's; None: unsigned
    allowed_executors: tuple[str, ...] = ()  # what an envelope may ask for instead
    member_ttl: float = 3.0
    """Liveness TTL: what this worker holds goes back to the queue this long after
    its last heartbeat."""
    concurrency: int = 1
    """How many messages it works on at once, each in a slot of its own (a thread, when
    more than one): 1 for an agent CLI; more (8 to 64) for model calls."""

    def __post_init__(self) -> None:
        # a retry is re-enqueued by the worker that judged it: signed by that member
        self.mailbox = Mailbox(self.store, self.team, self.member_id, credentials=self.credentials)
        self.runner = AttemptRunner(
            self.store, self.team, self.member_id, take=True, credentials=self.credentials
        )
        self.review = QueueReview(self)
        self.slots = Slots(self.concurrency, name=f"tenure-slot-{self.member_id}")
        self.in_hand = InHand()  # the attempts running, each with its own cancel event
        self.gate = KeyGate()
        self._dead_checked = float("-inf")
        self.heartbeat = MemberHeartbeat(
            self.store,
            self.team,
            self.member_id,
            ttl=self.member_ttl,
            priority=0,
            capabilities=(WORK_CAPABILITY,),
            memory=EpochMemory(None),
            on_lapse=self.in_hand.cancel_all,  # what we held may be running elsewhere by now
            on_lost=self.in_hand.cancel_all,
            slots=self.concurrency,
            free=lambda: self.slots.free,
        )

    @property
    def executed(self) -> int:
        return self.runner.executed

    def run(self, stop: threading.Event) -> None:
        """Join, then work until ``stop``. ``MemberIdTaken`` when the id is live in
        another process, at the start or (after our heartbeat lapsed) later."""
        self.heartbeat.start()
        lost = self.heartbeat.lost
        try:
            with cancelled_on(stop, self.stop_attempts):
                self._loop(stop, lost)
                self.slots.join()  # what is in hand ends (a stop, a lapse or a lost id cancelled it)
        finally:
            self.slots.join()
            self.heartbeat.stop(leave=True)
        if self.heartbeat.taken is not None:
            raise self.heartbeat.taken

    def _loop(self, stop: threading.Event, lost: threading.Event) -> None:
        while not stop.is_set() and not lost.is_set():
            if not self.slots.free:
                self.slots.wait_free(self.poll_interval)
                continue
            started = time.monotonic()  # an empty receive waited already; a failed one pauses
            try:
                self.slots.check()  # what a slot raised: a store lost ends this member
                busy = self._take(wait=RECEIVE_WAIT)
            except StoreLost:
                raise  # the team's store is gone: this member stops
            except TenureError as exc:  # one round's store error: the next round tries again
                busy = False
                self._store_error(exc)
            if not busy:
                self.settle_dead_letters()
                stop.wait(self.poll_interval - (time.monotonic() - started))

    def stop_attempts(self) -> None:
        """This worker stops: every attempt in hand is cancelled, and one that then ends
        without completing is released (its message comes back for another worker)."""
        self.runner.stopping.set()
        self.in_hand.cancel_all()

    def _store_error(self, exc: TenureError) -> None:
        try:
            self.event("queue.store_error", {"error": str(exc)})
        except TenureError:
            pass  # best effort while the store is unreachable

    def settle_dead_letters(self, *, now: float | None = None) -> int:
        """Finish or send to a person each task whose current attempt's message was given
        up on (delivered too often: each holder died or never finished it), since no
        worker will take it again; at most once a member TTL. How many were settled."""
        now = time.monotonic() if now is None else now
        if now - self._dead_checked < self.member_ttl:
            return 0
        self._dead_checked = now
        try:
            letters = self.store.dead_letters(self.team, WORK_QUEUE)
        except TenureError:
            return 0
        return sum(self.review.settle_dead(letter) for letter in letters)

    def poll_once(self, wait: float = 0.0) -> bool:
        """Take one message per free slot (waiting up to ``wait`` seconds for the first)
        and work them to the end; True if any came."""
        took = self._take(wait)
        self.slots.join()
        self.slots.check()
        return took

    def _take(self, wait: float = 0.0) -> bool:
        """Receive up to one message per free slot and start each in one."""
        deliveries = self._receive(self.slots.free, wait)
        for delivery in deliveries:
            self.slots.start(partial(self._handle_pinned, delivery))
        return bool(deliveries)

    def _receive(self, room: int, wait: float) -> list[Delivery]:
        return self.store.receive(
            self.team,
            WORK_QUEUE,
            consumer=self.member_id,
            visibility_timeout=self.visibility_timeout,
            max_messages=room,
            wait=wait,
        )

    def _handle_pinned(self, delivery: Delivery) -> None:
        with pinned():  # the known secrets, read once a message rather than once a write
            self.handle(delivery)

    def handle(self, delivery: Delivery) -> None:
        """A message that cannot be read is logged and given back, to be dead-lettered."""
        try:
            message = read_delivery(delivery)
        except ProtocolError as exc:
            info = {"id": delivery.message_id, "deliveries": delivery.delivery_count}
            self.event("queue.bad_message", {**info, "error": str(exc)[:2000]})
            give_back(self.store, self.team, delivery)
            return
        try:
            if message.type != "task.assign":
                raise ProtocolError("type", f"task.assign in the work queue, got {message.type}")
            said = self._work(message.body, delivery)
            if said == "keep":
                return  # another live worker holds it: it comes back if that one dies
            if said == "acked":
                return  # with the result and its judgement, in one commit
        except ProtocolError as exc:
            self.event("queue.bad_message", {"id": delivery.message_id, "error": str(exc)})
        except TenureError as exc:
            self.event("queue.error", {"id": delivery.message_id, "error": str(exc)})
            return
        except Exception as exc:  # noqa: BLE001 - a bug must not stop the worker
            self.event("queue.error", {"id": delivery.message_id, "error": crash_line(exc)})
            return  # not acked: after max deliveries it is dead-lettered
        self.store.ack(self.team, WORK_QUEUE, delivery.message_id)

    def _work(self, env: TaskEnvelope, delivery: Delivery) -> Said:
        if self.credentials is not None:
            try:  # the operator's, or a member's re-enqueued retry: never a stranger's
                self.credentials.verify(ENVELOPE, env, env.signature, by=ANYONE)
            except SignatureRefused as exc:
                self._refused(env, exc.claimed, str(exc))
                return "ack"
        # the attempt and its review are spans of the run that enqueued it (its producer's)
        with self.gate.only(env.idempotency_key), observe.parented(env.traceparent):
            return self._run(env, delivery)

    def _vet(self, env: TaskEnvelope) -> Vet | None:
        """With keys, what runs is the register's task, whatever the message says: the
        attempt the message names is begun, and refused (given back, nothing run) if its
        task is refused or the message's content is not the task's."""
        if self.credentials is None:
            return None
        claimed = env.signature.by if env.signature is not None else None

        def vet(record: TaskRecord) -> TaskEnvelope | str:
            task = self.review.register.read(record)
            if task.problem is not None:
                self._refused(env, claimed, f"its task is refused: {task.problem}")
                return task.problem
            built = envelope_for(task, epoch=QUEUE_EPOCH, assignee=WORK_QUEUE)
            differ = differing(env, built)
            if differ:
                reason = f"its {', '.join(differ)} differ from the register's task"
                self._refused(env, claimed, reason)
                return reason
            return built.model_copy(update={"traceparent": env.traceparent})

        return vet

    def _check_content(self, env: TaskEnvelope) -> None:
        """A message that was not run (its attempt was done, or is not the task's): with
        keys, one whose content is not its task's is reported all the same."""
        vet = self._vet(env)
        if vet is None:
            return
        try:
            vet(self.store.get_task(self.team, env.task_id))
        except TenureError:
            pass  # a task gone: nothing to compare

    def _refused(self, env: TaskEnvelope, claimed: str | None, reason: str) -> None:
        info = {"task_id": env.task_id, "attempt": env.attempt, "claimed": claimed}
        self.event("security.envelope_refused", {**info, "reason": reason})

    def _run(self, env: TaskEnvelope, delivery: Delivery) -> Said:
        ctx = self._context(env)
        if self.runner.stopping.is_set():
            ctx.cancelled.set()  # it stops: nothing more starts here
        with self.in_hand.holding(env, ctx.cancelled):
            ran = self.runner.run(
                env, self._executor_for(env), ctx, record=False, vet=self._vet(env)
            )
        if ran.kind == "released":
            self.event("queue.attempt_released", {"task_id": env.task_id, **ran.facts})
        if ran.kind in ("in_progress", "released"):
            return "keep"  # not acked: it comes back to whoever holds the claim next
        if ran.kind == "refused":
            self.review.put_right(self.review.register.get(env.task_id))
            return "ack"
        if ran.kind in ("replayed", "outdated"):
            self._check_content(env)  # nothing of it ran; a forged copy is still reported
        if ran.kind == "fenced":
            self.event("queue.fenced", {"task_id": env.task_id, **ran.facts})
        elif ran.kind == "outdated":
            self.event("queue.duplicate_absorbed", {"task_id": env.task_id, **ran.facts})
        if ran.kind == "replayed" and ran.result is not None:
            # recorded by a worker that may have died before judging it: finish the task
            finished = self.review.finish_recorded(env, TaskResult.model_validate(ran.result))
            return "ack" if finished else "keep"
        if ran.kind == "executed" and ran.result is not None:
            return self._judge(env, ran, delivery)
        self.review.carry_on(env)
        return "ack"

    def _judge(self, env: TaskEnvelope, ran: Ran, delivery: Delivery) -> Said:
        """Record the result, judge it and ack its message in one commit when judging it
        runs nothing (``judged_in_store``); if the task changed meanwhile (the commit is
        refused, having written nothing), or judging it runs a command or asks a model
        (the result must be recorded first, should this worker die meanwhile), the same
        steps one store call each."""
        assert ran.result is not None
        begun = ran.start.task if ran.start is not None else None
        if begun is None or not judged_in_store(self.review.register.read(begun), self.review.hooks):
            result = self.runner.record(self.store, env, ran.result)
            self.review.take(TaskResult.model_validate(result))
            return "ack"
        staged = self.runner.staged(ran)
        try:
            result = self.runner.record(staged, env, ran.result)
            QueueReview(_StagedMember(self, staged)).take(TaskResult.model_validate(result))
            staged.commit_staged(self.team, Ack(WORK_QUEUE, delivery.message_id))
            return "acked"
        except (Conflict, NotFound, StaleEpoch, Unstageable):
            pass
        result = self.runner.record(self.store, env, ran.result)
        self.review.take(TaskResult.model_validate(result))
        return "ack"

    def _context(self, env: TaskEnvelope) -> TaskContext:
        return TaskContext(
            worker_id=self.member_id,
            team=self.team,
            workdir=self.workdir,
            cancelled=threading.Event(),  # this attempt's own
            envelope=env,
            run_effect=effect_runner(self.store, self.team, self.member_id, env),
            record_event=self.event,
        )

    def _executor_for(self, env: TaskEnvelope) -> Executor:
        def refused(spec: str) -> None:
            self._refused_executor(env.task_id, spec)

        return choose_executor(env, self.executor, self.allowed_executors, refused)

    def _refused_executor(self, task_id: str, spec: str) -> None:
        self.event("security.executor_refused", {"task_id": task_id, "executor": spec[:200]})

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"member": self.member_id, **data})


@dataclass
class _StagedMember:
    """The worker as its review sees it while the writes are staged."""

    worker: QueueWorker
    store: Store  # the worker's store, staged

    def __post_init__(self) -> None:
        worker = self.worker
        self.team, self.member_id, self.workdir = worker.team, worker.member_id, worker.workdir
        self.trust: Trust | None = worker.review.trust
        self.credentials = worker.credentials
        self.mailbox = worker.mailbox.on(self.store)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"member": self.member_id, **data})
