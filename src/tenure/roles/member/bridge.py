"""An executor that hands each attempt to an agent outside this process (over MCP) and
waits for its word, bound to one task.

The follower still does everything else: it verifies the envelope's signature, runs
the attempt once under its idempotency key, signs the result and sends it to the
leader, whose verification ladder judges it. The agent only reads the envelope and
answers through a handful of calls; each names the bound task or none, and anything
it submits is size- and depth-checked here and built into a result with the
envelope's own task id, key and epoch (never the agent's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tenure.executors import TaskContext, failed, fit_result, make_result
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult, to_dict
from tenure.protocol.codec import translate
from tenure.protocol.errors import ConfigError, NotFound
from tenure.protocol.limits import (
    MAX_FIELD_BYTES,
    MAX_RESULT_BYTES,
    byte_size,
    check_depth,
    json_size,
    over,
)
from tenure.roles.member.agent_view import agent_status, envelope_view, next_step
from tenure.roles.register import Task, read_task
from tenure.store import TERMINAL_STATES, Store

__all__ = ["AGENT_FIELDS", "AGENT_STATUSES", "Bridge", "OutOfScope"]

AGENT_STATUSES = ("completed", "failed", "refused")
"""What an agent may submit as a final word (a question goes through ``ask``)."""
AGENT_FIELDS = ("status", "artifact", "notes", "evidence", "confidence", "grounding")
"""What of a result an agent may say: never its task id, key, epoch, usage or signature."""
RESTATED_KEPT = 500
"""Characters of each restated criterion kept in the ``mcp.progress`` event."""
POLL = 0.05
ONE_ATTEMPT_OVER = "your word on this attempt is given: stop now; the leader checks what you left"
ONE_ATTEMPT_ASKED = (
    "stop now: this attempt ends with your question; the operator's answer comes with "
    "the task's next attempt"
)


class OutOfScope(ConfigError):
    """A call named a task other than the one this bridge is bound to."""


@dataclass
class _InHand:
    """The attempt the follower is executing, and the agent's word on it once given."""

    envelope: TaskEnvelope
    ctx: TaskContext
    reply: TaskResult | None = None
    asked_with: int = 0  # answers the task had when the agent asked (for wait_answer)
    given: dict[str, Any] = field(default_factory=dict)


class Bridge:
    """The follower's executor for an agent that works over MCP.

    ``task_id`` binds it to that task; None binds it to the first envelope it is given.
    An envelope of another task is never shown to the agent: its attempt fails saying
    this member serves one task only (the leader retries it on another worker).

    ``one_attempt``: the bridge serves the one attempt ``lending`` lends it, to an agent
    its caller runs (a coding agent CLI); a question ends that attempt and its answer
    comes with the next one, so there is no waiting for it here."""

    def __init__(
        self,
        store: Store,
        team: str,
        member: str,
        task_id: str | None = None,
        *,
        one_attempt: bool = False,
    ) -> None:
        self.store = store
        self.team = team
        self.member = member
        self.task_id = task_id
        self.one_attempt = one_attempt
        self.changed = threading.Condition()
        self.in_hand: _InHand | None = None
        self.last: TaskEnvelope | None = None  # the latest envelope, also once it is answered
        self.asked_with = -1  # answers the task had at the last question (-1: none asked)
        self.closed = False
        self.halted: str | None = None  # why the member stopped serving, if it did

    def close(self) -> None:
        """The agent's server has stopped: the attempt in hand (if any) ends as failed,
        so the leader retries it rather than waiting out its deadline."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def halt(self, why: str) -> None:
        """The member stopped (its id was taken, its store lost): every call says so."""
        with self.changed:
            self.halted = why
        self.close()

    # --- the follower's side ------------------------------------------------------------

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        hand = self._take(envelope, ctx)
        if isinstance(hand, TaskResult):
            return hand
        try:
            return self._await_reply(hand)
        finally:
            self._release(closing=False)

    @contextmanager
    def lending(
        self, envelope: TaskEnvelope, ctx: TaskContext
    ) -> Iterator[Callable[[], TaskResult | None]]:
        """The attempt in the agent's hands while the block runs (the caller runs the
        agent); yields what returns the agent's word so far (None until it gives one).
        When the block ends the bridge is closed: every later call says so."""
        hand = self._take(envelope, ctx)
        if isinstance(hand, TaskResult):
            raise ConfigError(str(hand.notes.uncertain[0]) if hand.notes.uncertain else "refused")
        try:
            yield lambda: hand.reply
        finally:
            self._release(closing=True)

    def _take(self, envelope: TaskEnvelope, ctx: TaskContext) -> _InHand | TaskResult:
        """The attempt put in the agent's hands, or the failed result saying why not."""
        with self.changed:
            if self.task_id is None:
                self.task_id = envelope.task_id
            if self.closed:
                return failed(envelope, f"member {self.member!r} has stopped serving its agent")
            if envelope.task_id != self.task_id:
                return failed(
                    envelope,
                    f"member {self.member!r} serves only task {self.task_id!r} to its agent "
                    f"over MCP; task {envelope.task_id!r} needs another worker",
                )
            hand = _InHand(envelope, ctx)
            self.in_hand, self.last = hand, envelope
            self.changed.notify_all()
            return hand

    def _release(self, *, closing: bool) -> None:
        with self.changed:
            self.in_hand = None
            self.closed = self.closed or closing
            self.changed.notify_all()

    def _await_reply(self, hand: _InHand) -> TaskResult:
        ends = time.monotonic() + hand.envelope.deadline_seconds
        with self.changed:
            while hand.reply is None:
                if hand.ctx.cancelled.is_set():
                    return failed(
                        hand.envelope, "the attempt was stopped before the agent answered"
                    )
                if self.closed:
                    return failed(
                        hand.envelope, "the agent's MCP server stopped before it answered"
                    )
                left = ends - time.monotonic()
                if left <= 0:
                    return failed(hand.envelope, "the agent gave no result within the deadline")
                self.changed.wait(min(left, POLL))
            return hand.reply

    # --- the agent's side (each call from any thread) ------------------------------------

    def check(self, task_id: str | None) -> str:
        """The bound task's id; ``OutOfScope`` when ``task_id`` names another, or none is
        bound yet and one is named."""
        if self.halted is not None:
            raise ConfigError(f"this member has stopped serving: {self.halted}")
        if task_id is not None and task_id != self.task_id:
            bound = repr(self.task_id) if self.task_id else "the task assigned to it (none yet)"
            raise OutOfScope(
                f"task_id: this server serves {bound} only; {task_id[:80]!r} is not in its scope"
            )
        if self.task_id is None:
            raise ConfigError("no task is assigned to this member yet: call read_task again later")
        return self.task_id

    def wait_assigned(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the first envelope; True once there is one."""
        ends = time.monotonic() + max(0.0, seconds)
        with self.changed:
            while self.last is None and self.halted is None:
                left = ends - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, POLL))
            return self.last is not None

    def view(self, task_id: str | None = None) -> dict[str, Any]:
        """What the agent may read of its task: the envelope in hand (or the last one),
        with where the task stands in the register."""
        bound = self.check(task_id)
        task = self._task(bound)
        with self.changed:
            env = self.in_hand.envelope if self.in_hand else self.last
            in_hand = self.in_hand is not None and self.in_hand.reply is None
        view: dict[str, Any] = {
            "task_id": bound,
            "state": task.state,
            "status": agent_status(task.state),
            "attempt": task.attempt,
            "in_hand": in_hand,
            "question": task.data.question,
            "answers": [to_dict(a) for a in task.data.qa],
        }
        if env is not None:
            view.update(envelope_view(env))
        view["next"] = (
            ONE_ATTEMPT_OVER if self.one_attempt and not in_hand else next_step(task, in_hand)
        )
        return view

    def progress(
        self,
        task_id: str | None,
        message: str,
        criteria: list[str] | None,
        fraction: float | None,
    ) -> dict[str, Any]:
        """A check-in, sent as the signed ``task.progress`` of the attempt (which carries
        the envelope's own criteria). The agent may restate the acceptance criteria in
        its own words: then all of them, as many as the task has (a restatement that
        drops one is the drift a check-in is there to catch), logged as ``mcp.progress``.
        The reply restates the task's criteria, whatever the agent said."""
        hand = self._hand(task_id)
        restated = list(criteria or [])
        _check_texts({"message": message, **{f"criteria[{n}]": c for n, c in enumerate(restated)}})
        wanted = len(hand.envelope.acceptance_criteria)
        if restated and len(restated) != wanted:
            expected = (
                f"all {wanted} acceptance criteria restated, or none"
                if wanted
                else "none: this task has no acceptance criteria"
            )
            raise ProtocolError("criteria", f"{expected}; got {len(restated)}")
        hand.ctx.progress(message, fraction)
        hand.ctx.record(
            "mcp.progress",
            {
                "task_id": hand.envelope.task_id,
                "attempt": hand.envelope.attempt,
                "restated": [c[:RESTATED_KEPT] for c in restated],
            },
        )
        return {
            "recorded": True,
            "attempt": hand.envelope.attempt,
            "acceptance_criteria": list(hand.envelope.acceptance_criteria),
            "checks": [to_dict(c) for c in hand.envelope.checks],
            "next": "the result is accepted only if it meets every criterion and passes "
            "every check, which the leader runs itself",
        }

    def ask(self, task_id: str | None, question: str) -> dict[str, Any]:
        """Give the attempt back as ``blocked`` with ``question``: the leader puts the task
        in the inbox; an operator's answer re-queues it with the answer in its input."""
        _check_texts({"question": question})
        if not question.strip():
            raise ProtocolError("question", "a question (it is empty)")
        bound = self.check(task_id)
        answers = len(self._task(bound).data.qa)
        result = make_result(self._hand(task_id).envelope, "blocked", question=question)
        self._reply(task_id, result)
        with self.changed:
            self.asked_with = answers
        then = ONE_ATTEMPT_ASKED if self.one_attempt else "call wait_for_answer"
        return {"asked": True, "task_id": bound, "next": then}

    def wait_answer(self, task_id: str | None, seconds: float) -> dict[str, Any]:
        """The operator's answer to the last question, waiting up to ``seconds``."""
        bound = self.check(task_id)
        ends = time.monotonic() + max(0.0, seconds)
        while True:
            task = self._task(bound)
            asked = self._asked(task)
            if len(task.data.qa) > asked:
                latest = task.data.qa[-1]
                return {"answered": True, "question": latest.question, "answer": latest.answer}
            if task.state in TERMINAL_STATES or time.monotonic() >= ends:
                return {
                    "answered": False,
                    "state": task.state,
                    "status": agent_status(task.state),
                }
            time.sleep(POLL * 4)

    def submit(self, task_id: str | None, given: dict[str, Any]) -> dict[str, Any]:
        """The agent's result: checked against the limits, built with the envelope's
        own ids, handed to the follower, which signs it and reports it to the leader."""
        size = json_size(given)
        if size > MAX_RESULT_BYTES:
            raise ProtocolError("result", over(size, MAX_RESULT_BYTES))
        check_depth(given, "result")
        for name in given:
            if name not in AGENT_FIELDS:
                raise ProtocolError(
                    str(name)[:80], f"one of {', '.join(AGENT_FIELDS)} (an agent sets no other)"
                )
        status = given.get("status")
        if status not in AGENT_STATUSES:
            raise ProtocolError("status", f"one of {', '.join(AGENT_STATUSES)}; got {status!r}")
        hand = self._hand(task_id)
        fields = {k: v for k, v in given.items() if v is not None and k != "status"}
        try:
            result = fit_result(make_result(hand.envelope, status, **fields))
        except ValidationError as exc:
            raise translate(exc, source="result") from None
        if result.status != status:  # fit_result: too large once signed
            raise ProtocolError("result", result.notes.uncertain[0])
        self._reply(task_id, result)
        then = (
            ONE_ATTEMPT_OVER
            if self.one_attempt
            else "the leader verifies it: read_task shows the verdict"
        )
        return {
            "submitted": True,
            "task_id": hand.envelope.task_id,
            "attempt": hand.envelope.attempt,
            "next": then,
        }

    # --- helpers ------------------------------------------------------------------------

    def _asked(self, task: Task) -> int:
        """How many answers the task had when its question was asked. A server started
        after the question (the agent's earlier one stopped) takes the question the
        register holds."""
        with self.changed:
            if self.asked_with < 0 and task.data.question:
                self.asked_with = len(task.data.qa)
            if self.asked_with < 0:
                raise ConfigError("no question was asked: call ask_question first")
            return self.asked_with

    def _hand(self, task_id: str | None) -> _InHand:
        bound = self.check(task_id)
        with self.changed:
            hand = self.in_hand
        if hand is None or hand.reply is not None:
            task = self._task(bound)
            raise ConfigError(
                f"no attempt of task {bound!r} is in this member's hands (the task is "
                f"{task.state}): {next_step(task, False)}"
            )
        return hand

    def _reply(self, task_id: str | None, result: TaskResult) -> None:
        with self.changed:
            hand = self._hand(task_id)
            hand.reply = result
            self.changed.notify_all()

    def _task(self, task_id: str) -> Task:
        try:
            return read_task(self.store.get_task(self.team, task_id))
        except NotFound:
            raise ConfigError(f"task {task_id!r} is not in team {self.team!r}") from None


def _check_texts(texts: dict[str, str]) -> None:
    for name, text in texts.items():
        size = byte_size(text)
        if size > MAX_FIELD_BYTES:
            raise ProtocolError(name, over(size, MAX_FIELD_BYTES))
