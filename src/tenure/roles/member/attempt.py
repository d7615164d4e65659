"""One attempt executed once under its idempotency key: the follower and the queue
worker both run every envelope through ``AttemptRunner``.

The steps, always in this order:

1. **replay**: the ledger holds a result for the key: that result (a redelivery
   is not a new attempt, and reporting it again is harmless);
2. **still ours**: the register's task is at this attempt, queued or running,
   and assigned to this member (or, in queue mode, to nobody yet);
3. **claim** the key (``effect_begin``): another live holder means the attempt
   is in progress elsewhere; a stale epoch is refused here;
4. **mark running**, fenced; refused → the claim is given back;
5. **execute** the executor with the attempt's context;
6. **record** the result under the key (``effect_finish``: the first record wins);
7. the caller **reports** it (to the leader's queue, or to its own review).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tenure.executors import (
    Executor,
    RefusedExecutor,
    TaskContext,
    UnknownExecutor,
    resolve_executor,
    safe_result,
)
from tenure.protocol import ProtocolError, TaskEnvelope, to_dict
from tenure.protocol.errors import Conflict, EffectInProgress, NotFound, StaleEpoch
from tenure.store import Store
from tenure.store.records import TaskRecord

__all__ = ["AttemptRunner", "Ran", "choose_executor"]

RanKind = Literal["executed", "replayed", "outdated", "fenced", "in_progress"]


@dataclass(frozen=True)
class Ran:
    """What became of one envelope. ``result`` (a result body) when there is one to report."""

    kind: RanKind
    result: dict[str, Any] | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # why it did not run, for the log


class AttemptRunner:
    """Runs envelopes for one member of one team.

    ``claim_margin`` is added to an attempt's deadline for the length of its claim on
    the key, so a claim outlives a live executor; ``take`` (queue mode) lets the member
    take an attempt nobody is assigned to, naming itself the assignee.
    """

    def __init__(
        self, store: Store, team: str, member: str, *, claim_margin: float = 0.0, take: bool = False
    ) -> None:
        self.store = store
        self.team = team
        self.member = member
        self.claim_margin = claim_margin
        self.take = take
        self.executed = 0

    def run(self, env: TaskEnvelope, executor: Executor, ctx: TaskContext) -> Ran:
        recorded = self.store.effect_lookup(self.team, env.idempotency_key)
        if recorded is not None:
            return Ran("replayed", dict(recorded.result))
        try:
            task = self.store.get_task(self.team, env.task_id)
        except NotFound:
            return Ran("outdated", facts={"error": f"task {env.task_id!r} is not registered"})
        if not self._ours(task, env):
            seen = {"state": task.state, "attempt": task.attempt, "assignee": task.assignee}
            return Ran("outdated", facts=seen)
        try:
            ticket = self.store.effect_begin(
                self.team,
                env.idempotency_key,
                epoch=env.epoch,
                holder=self.member,
                claim_seconds=env.deadline_seconds + self.claim_margin,
            )
        except StaleEpoch as exc:
            return Ran("fenced", facts={"current": exc.current})
        except EffectInProgress as exc:
            return Ran("in_progress", facts={"error": str(exc)})
        if ticket.status == "done":
            return Ran("replayed", dict(ticket.result))
        try:
            self._mark_running(task, env)
        except StaleEpoch as exc:
            self.store.effect_abort(self.team, env.idempotency_key, holder=self.member)
            return Ran("fenced", facts={"current": exc.current})
        except (Conflict, NotFound) as exc:
            refused = self._mark_running_again(env, exc)
            if refused is not None:
                self.store.effect_abort(self.team, env.idempotency_key, holder=self.member)
                return refused
        result = safe_result(env, lambda: executor.execute(env, ctx))
        self.executed += 1
        finished = self.store.effect_finish(
            self.team, env.idempotency_key, holder=self.member, result=to_dict(result)
        )
        return Ran("executed", dict(finished.result))

    def _mark_running_again(self, env: TaskEnvelope, first: Exception) -> Ran | None:
        """The task changed between reading it and marking it running. If it is still
        this attempt, ours, the change was someone else's business (the leader charging
        an earlier attempt's spend, say): mark it again. Else why it is not ours."""
        try:
            task = self.store.get_task(self.team, env.task_id)
            if not self._ours(task, env):
                return Ran("outdated", facts={"error": str(first)})
            self._mark_running(task, env)
        except StaleEpoch as exc:
            return Ran("fenced", facts={"current": exc.current})
        except (Conflict, NotFound) as exc:
            return Ran("outdated", facts={"error": str(exc)})
        return None

    def _ours(self, task: TaskRecord, env: TaskEnvelope) -> bool:
        if task.state not in ("queued", "running") or task.attempt != env.attempt:
            return False
        # queue mode: whoever held it before must have let its claim lapse (step 3)
        return self.take or task.assignee == self.member

    def _mark_running(self, task: TaskRecord, env: TaskEnvelope) -> None:
        self.store.transition(
            self.team,
            env.task_id,
            epoch=env.epoch,
            expect=[task.state],
            to="running",
            version=task.version,
            **({"assignee": self.member} if self.take else {}),
        )


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
