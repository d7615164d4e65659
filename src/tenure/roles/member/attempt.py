"""One attempt executed once under its idempotency key: the follower and the queue
worker both run every envelope through ``AttemptRunner``.

The steps, always in this order:

1. **replay**: the ledger holds a result for the key: that result (a redelivery
   is not a new attempt, and reporting it again is harmless);
2. **still ours**: the register's task is at this attempt, queued or running,
   and assigned to this member (or, in queue mode, to nobody yet);
3. **claim** the key: another live holder means the attempt is in progress
   elsewhere; a stale epoch is refused here;
4. **mark running**, fenced (no seal of its own: the lead's seal of the dispatch
   covers the record, ``roles.register.seal``);

   (1 to 4 are one atomic store call, ``Store.begin_attempt``: nothing can change
   between the look and the claim, and a refusal writes nothing)
5. **execute** the executor with the attempt's context, after killing what an
   earlier holder's executor left running on this machine (``worker.orphan_reaped``);
   every process the executor starts is recorded in the attempt's data;
6. **record** the result under the key (``effect_finish``: the first record wins);
7. the caller **reports** it (to the leader's queue, or to its own review).

6, 7 and the ack of the message can go in one ``commit``: ``run(record=False)`` hands
the result back unrecorded and ``staged`` gives the stand-in store the caller
records, reports and acks on (``store.staged``). So an attempt is three round trips:
receive, begin, commit.

A member that is stopping (``stopping``) cancels what it has in hand; an attempt that
then ends without completing is **released** instead of recorded: the task goes back
to ``queued`` for its assignee and the claim on the key is dropped, so the leader
sends the same attempt again (or, once the member has left, a new one elsewhere) and
no failure is written for a stop the operator asked for.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tenure import observe
from tenure.coord import Credentials, run_effect
from tenure.executors import (
    Executor,
    RefusedExecutor,
    TaskContext,
    UnknownExecutor,
    resolve_executor,
    safe_result,
)
from tenure.executors.process_group import ChildProcess, reap, reap_marked
from tenure.protocol import ProtocolError, TaskEnvelope, TenureError, to_dict
from tenure.protocol.errors import Conflict
from tenure.protocol.taskspec import CHILDREN_KEPT, ChildRecord
from tenure.roles.register import read_task
from tenure.roles.register.access import sealed_transition
from tenure.store import Store
from tenure.store.records import TaskRecord
from tenure.store.staged import StagedStore
from tenure.store.writes import AttemptStart

__all__ = ["AttemptRunner", "Ran", "Vet", "choose_executor", "effect_runner"]

RECORD_TRIES = 5
RanKind = Literal[
    "executed", "replayed", "outdated", "fenced", "in_progress", "refused", "released"
]
Vet = Callable[[TaskRecord], "TaskEnvelope | str"]
"""Looks at the task an attempt was begun on, before it runs: the envelope to run (the
task's own), or why it must not run."""


@dataclass(frozen=True)
class Ran:
    """What became of one envelope. ``result`` (a result body) when there is one to report;
    ``recorded`` False when the caller still has to record it (``AttemptRunner.record``)."""

    kind: RanKind
    result: dict[str, Any] | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # why it did not run, for the log
    start: AttemptStart | None = None
    recorded: bool = True


def _not_run(env: TaskEnvelope, start: AttemptStart) -> Ran:
    """What ``begin_attempt`` found instead of an attempt to run."""
    if start.outcome == "replayed":
        return Ran("replayed", dict(start.result))
    if start.outcome == "fenced":
        return Ran("fenced", facts={"current": start.current})
    if start.outcome == "in_progress":
        holder = start.holder
        return Ran(
            "in_progress",
            facts={"error": f"effect {env.idempotency_key!r} is being run by {holder!r}"},
        )
    if start.task is None:
        return Ran("outdated", facts={"error": f"task {env.task_id!r} is not registered"})
    task = start.task
    return Ran(
        "outdated", facts={"state": task.state, "attempt": task.attempt, "assignee": task.assignee}
    )


class AttemptRunner:
    """Runs envelopes for one member of one team.

    ``claim_margin`` is added to an attempt's deadline for the length of its claim on
    the key, so a claim outlives a live executor; ``take`` (queue mode) lets the member
    take an attempt nobody is assigned to, naming itself the assignee. With
    ``credentials`` (the member's working key) its register writes are sealed.
    """

    def __init__(
        self,
        store: Store,
        team: str,
        member: str,
        *,
        claim_margin: float = 0.0,
        take: bool = False,
        credentials: Credentials | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.member = member
        self.claim_margin = claim_margin
        self.take = take
        self.credentials = credentials
        self.executed = 0  # attempts this runner executed (its slots count together)
        self._count = threading.Lock()
        self.stopping = threading.Event()
        """Set when the member stops: an attempt its stop cancelled is released."""

    def run(
        self,
        env: TaskEnvelope,
        executor: Executor,
        ctx: TaskContext,
        *,
        record: bool = True,
        vet: Vet | None = None,
    ) -> Ran:
        """Steps 1 to 6 (``record=False``: 1 to 5, the result returned unrecorded for the
        caller to record with what follows it in one commit, ``staged``). ``vet`` looks at
        the task as it was begun, before anything runs, and says what to run: an attempt
        it refuses is given back (the claim dropped, the task queued again) and nothing
        runs."""
        start = self.store.begin_attempt(  # steps 1 to 4, one atomic step
            self.team,
            env.task_id,
            env.idempotency_key,
            epoch=env.epoch,
            attempt=env.attempt,
            holder=self.member,
            claim_seconds=env.deadline_seconds + self.claim_margin,
            take=self.take,
        )
        if start.outcome != "run" or start.task is None:
            return _not_run(env, start)
        if vet is not None:
            checked = vet(start.task)
            if isinstance(checked, str):
                self._give_back(env, start.task)
                return Ran("refused", facts={"reason": checked})
            env, ctx = checked, replace(ctx, envelope=checked)
        self._reap_survivors(start.task, env)
        return self._execute(env, executor, ctx, start, record)

    def _execute(
        self,
        env: TaskEnvelope,
        executor: Executor,
        ctx: TaskContext,
        start: AttemptStart,
        record: bool,
    ) -> Ran:
        """Steps 5 and 6: run the executor, marking and recording what it starts."""
        mark = secrets.token_hex(8)
        ctx = replace(
            ctx,
            run_mark=mark,
            child_started=lambda child: self._record_child(env, child, mark),
        )
        # the attempt's span is a child of the run's, in the sender's process
        with (
            observe.parented(env.traceparent),
            observe.invoke_agent(self.team, self.member, env) as span,
        ):
            result = safe_result(env, lambda: executor.execute(env, ctx))
            span.set("tenure.result.status", result.status)
        if self.stopping.is_set() and ctx.cancelled.is_set() and result.status != "completed":
            return self._release(env)
        with self._count:
            self.executed += 1
        if not record:
            return Ran("executed", to_dict(result), start=start, recorded=False)
        return Ran("executed", self.record(self.store, env, to_dict(result)), start=start)

    def record(self, store: Store, env: TaskEnvelope, result: dict[str, Any]) -> dict[str, Any]:
        """Step 6 on ``store`` (the store itself, or a ``StagedStore`` whose commit carries
        what follows too): the first recorded result of the key, which is what counts."""
        finished = store.effect_finish(
            self.team, env.idempotency_key, holder=self.member, result=result
        )
        return dict(finished.result)

    def staged(self, ran: Ran) -> StagedStore:
        """A stand-in for the store for the writes that end an executed attempt (record,
        report or judge, ack): they are made in one ``commit``."""
        if ran.start is None:
            return StagedStore(self.store)
        return StagedStore.after(self.store, ran.start)

    def _release(self, env: TaskEnvelope) -> Ran:
        """The member's stop cancelled this attempt: the task back to ``queued`` (still
        assigned: the leader re-sends it, or retries it once this member has left), then
        the claim on its key dropped. Nothing is recorded or reported."""
        try:
            self._undo_start(env, self.store.get_task(self.team, env.task_id))
        except TenureError as exc:  # the claim lapses with this member's heartbeat anyway
            return Ran("released", facts={"error": str(exc)})
        return Ran("released", facts={"reason": "the member stopped"})

    def _undo_start(self, env: TaskEnvelope, record: TaskRecord) -> None:
        """This member's start of the attempt undone: the task back to ``queued`` as it was
        (in queue mode nobody's), then the claim dropped. A plain change of state, like the
        start itself: the seal of the record it was started from still covers it
        (``roles.register.seal``)."""
        ours = self.take or record.assignee == self.member
        if (record.state, record.attempt) == ("running", env.attempt) and ours:
            self.store.transition(
                self.team,
                env.task_id,
                epoch=env.epoch,
                expect=["running"],
                to="queued",
                version=record.version,
                **({"assignee": None} if self.take else {}),
            )
        self.store.effect_abort(self.team, env.idempotency_key, holder=self.member)

    def _record_child(self, env: TaskEnvelope, child: ChildProcess, mark: str) -> None:
        """Keep a process the executor started in the attempt's data, so whoever holds
        the task next can end it should this member die (best effort: the death signal
        and the member's own exit handling come first)."""
        entry = ChildRecord(**child.as_json(), member=self.member, attempt=env.attempt, mark=mark)
        for _ in range(RECORD_TRIES):  # the leader may write the task meanwhile
            try:
                record = self.store.get_task(self.team, env.task_id)
                task = read_task(record)
                if task.problem or (record.state, record.attempt) != ("running", env.attempt):
                    return
                if not self.take and record.assignee != self.member:
                    return  # the attempt went to another (a stand-in): not ours to write
                kept = [*task.data.children, entry][-CHILDREN_KEPT:]
                sealed_transition(
                    self.store,
                    record,
                    "running",
                    epoch=env.epoch,
                    credentials=self.credentials,
                    grant=not self.take,  # in queue mode any key of the team seals
                    data=task.data.with_(children=kept, seal=None).dump(),
                )
                return
            except Conflict:
                continue
            except TenureError:
                return

    def _give_back(self, env: TaskEnvelope, task: TaskRecord) -> None:
        """An attempt begun and refused before it ran, undone (``_undo_start``). Best
        effort: a claim that stays lapses with its holder, and a task left running is the
        leader's to supervise."""
        try:
            self._undo_start(env, task)
        except TenureError:
            pass

    def _reap_survivors(self, record: TaskRecord, env: TaskEnvelope) -> None:
        """Before running an attempt: kill what an earlier holder's executor left
        running on this machine (its member died, the death signal reached only the
        direct child), so it cannot finish its effect beside ours."""
        task = read_task(record)
        if task.problem:
            return
        for child in task.data.children:
            found = ChildProcess(child.pid, child.pgid, child.host, child.boot, child.started)
            if reap(found):
                self._reaped(env, pid=child.pid, pgid=child.pgid, of=child.member)
        marks = {child.mark for child in task.data.children}
        for pid in reap_marked(marks):  # left its group for a session of its own
            self._reaped(env, pid=pid, pgid=None, of=None)

    def _reaped(self, env: TaskEnvelope, **found: Any) -> None:
        data = {"member": self.member, "task_id": env.task_id, **found}
        try:
            self.store.append_event(self.team, "worker.orphan_reaped", data)
        except TenureError:
            pass  # it is dead either way


def effect_runner(store: Store, team: str, holder: str, env: TaskEnvelope) -> Any:
    """``ctx.effect`` for an attempt: each side effect of the task once under its own
    key, claimed by ``holder`` for as long as the attempt may run."""

    def effect(key: str, fn: Any) -> Any:
        return run_effect(
            store,
            team,
            key,
            fn,
            epoch=env.epoch,
            holder=holder,
            claim_seconds=env.deadline_seconds,
            wait_seconds=env.deadline_seconds,
        )

    return effect


def choose_executor(
    env: TaskEnvelope,
    own: Executor,
    allowed: tuple[str, ...],
    refused: Callable[[str], None],
) -> Executor:
    """The executor a member runs an envelope with: its own, or one the envelope names
    only if the member allowlists it. A message never chooses what runs: an executor
    it names that is not allowed fails the attempt (``refused`` is told)."""
    if not env.executor:
        return own
    if env.executor not in allowed:
        refused(env.executor)
        return RefusedExecutor(env.executor, allowed)
    try:
        return resolve_executor(env.executor)
    except ProtocolError:
        return UnknownExecutor(env.executor)
