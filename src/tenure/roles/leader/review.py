"""The leader's judgement of a result: verify, accept, retry with history, or escalate.

Hooks take part at fixed points (``on_result``, ``before_review``, ``on_accept``,
``before_retry``, ``on_exhausted``); everything else here is the same for every
team: a result counts only from the member the attempt is assigned to and for
the current attempt; its spend is recorded; a failure becomes the next attempt's
history; after the last attempt, a person decides.
"""

from __future__ import annotations

from tenure.coord import ANYONE, SignatureRefused
from tenure.models.meter import Mark
from tenure.protocol import CommandEvidence, TaskResult, idempotency_key, to_dict
from tenure.protocol.clip import clip
from tenure.protocol.envelope import PriorAttempt
from tenure.protocol.errors import Conflict
from tenure.protocol.taskspec import AttemptData
from tenure.protocol.words import counted
from tenure.roles.leader.hooks import Hooks, Leading
from tenure.roles.leader.ladder import run_ladder
from tenure.roles.member.wire import RESULT
from tenure.roles.register import Task
from tenure.roles.register.spend import (
    awaiting_entry,
    charge_late,
    log_attempt,
    log_extra,
    logged,
    logged_calls,
    with_wall,
)
from tenure.verify import Verdict, verdict_event
from tenure.verify.decisions import VERDICT_EVENT

FAILURE_LIMIT = 2000
REASON_LIMIT = 500


class Reviewer:
    """Judges results for ``ctx`` (the leader), calling ``hooks`` at each point."""

    def __init__(self, ctx: Leading, hooks: Hooks) -> None:
        self.ctx = ctx
        self.hooks = hooks

    # --- a result arrives ---------------------------------------------------------------

    def on_result(self, result: TaskResult, sender: str | None = None) -> None:
        """Take a result into review, unless it is a duplicate, from an old attempt, from
        a member the attempt was not assigned to, or refused by a hook."""
        ctx = self.ctx
        task = ctx.register.get(result.task_id)
        info = {"task_id": task.task_id, "key": result.idempotency_key}
        if task.tamper is not None:  # its record is not the team's: it is put right first
            reason = f"its task's record is refused: {task.problem}"
            ctx.event("leader.result_refused", {**info, "sender": sender, "reason": reason})
            return
        if ctx.credentials is not None:  # who sent it is who signed it, or it is refused
            try:
                signer = ctx.credentials.verify(RESULT, result, result.signature, by=ANYONE)
            except SignatureRefused as exc:
                said: dict[str, object] = {**info, "sender": sender, "claimed": exc.claimed}
                ctx.event("security.result_refused", {**said, "reason": str(exc)})
                return
            if sender is not None and sender != signer:
                reason = f"it says it is from {sender} but {signer} signed it"
                said = {**info, "sender": sender, "claimed": signer, "reason": reason}
                ctx.event("security.result_refused", said)
                return
            sender = signer  # below, a result counts only as its assignee's own
        if self._late(task, result, sender):
            return
        if sender is not None and task.assignee is not None and sender != task.assignee:
            reason = f"the attempt is assigned to {task.assignee}, not {sender}"
            said = {**info, "sender": sender, "claimed": sender, "reason": reason}
            ctx.event("security.result_refused", said)
            return
        refused = self.hooks.on_result(ctx, task, result)
        if refused:
            ctx.event("leader.result_refused", {**info, "sender": sender, "reason": refused})
            return
        current = idempotency_key(task.task_id, task.attempt)
        if result.idempotency_key != current or task.state != "running":
            ctx.event("leader.duplicate_absorbed", {**info, "state": task.state})
            return
        member = sender or task.assignee
        data = log_attempt(task.data, task.attempt, result.usage, self.ran(task), member)
        try:
            task = ctx.register.move(task, "review", result=to_dict(result), data=data)
        except Conflict:
            ctx.event("leader.duplicate_absorbed", {**info, "state": "changed"})
            return
        self.review(task)

    def review(self, task: Task) -> None:
        """Accept, retry or escalate a task in ``review`` by its result."""
        if task.problem is not None:
            self._unreadable(task)
            return
        result = TaskResult.model_validate(task.result)
        if result.status == "completed":
            self._verify(task, result)
        elif result.status == "failed":
            self.retry(task, "failed", _failure_text(result))
        elif result.status == "blocked":
            self.block(task, f"question: {result.question}", question=result.question)
        else:
            reason = "; ".join(result.notes.uncertain) or "no reason given"
            self.block(task, f"refused: {reason}")

    def _verify(self, task: Task, result: TaskResult) -> None:
        ctx = self.ctx
        mark = ctx.trust.meter.mark()
        review = self.hooks.before_review(ctx, task, result)
        verdicts = None
        try:
            if not review.decided:
                verdicts = run_ladder(
                    task, result, review, workdir=ctx.workdir, trust=ctx.trust, event=ctx.event
                )
        finally:
            for after in review.after:
                after()
        task = self._charge_judges(task, mark)
        if verdicts is None:
            return  # a hook settled it (e.g. sent it to a person)
        failing = [v for v in verdicts if not v.passed]
        if failing:
            self.retry(task, "rejected", f"{failing[0].check} check failed: {failing[0].reason}")
        elif not self.hooks.on_accept(ctx, task, verdicts):
            self.finish(task, f"accepted: {', '.join(v.check for v in verdicts)}")

    def _unreadable(self, task: Task) -> None:
        """A task whose register entry cannot be read is neither passed nor guessed at:
        a failed verdict says why, and a person decides."""
        what = "checks" if "spec.checks" in str(task.problem) else "register entry"
        verdict = Verdict("register", False, f"the task's {what} are not valid: {task.problem}")
        key = idempotency_key(task.task_id, max(task.attempt, 1))
        self.ctx.event(VERDICT_EVENT, verdict_event(verdict, task_id=task.task_id, key=key))
        self.block(task, verdict.reason)

    # --- where a task goes next ---------------------------------------------------------

    def retry(self, task: Task, status: str, failure: str) -> None:
        """A new attempt with the failure in its history, or the inbox when out of tries."""
        ctx = self.ctx
        prior = PriorAttempt(
            attempt=max(task.attempt, 1), status=status, failure=failure[-FAILURE_LIMIT:]
        )
        data = self._given_up(task)
        data = data.with_(history=[*data.history, prior], dispatched_at=None)
        stop = self.hooks.before_retry(ctx, task, data)
        if stop is not None:  # a reason that is the failure itself is not said twice
            said = (
                stop.reason
                if failure.startswith(stop.reason)
                else f"{stop.reason}; last failure: {failure}"
            )
            self.fail(task, said, data=data, by=stop.by)
            return
        if task.used_attempts >= task.spec.max_attempts:
            if self.hooks.on_exhausted(ctx, task, failure, data):
                return
            used = counted(task.used_attempts, "attempt")
            self.block(task, f"gave up after {used}: {failure}", data=data)
            return
        ctx.event(
            "task.retry", {"task_id": task.task_id, "attempt": task.attempt, "why": clip(failure, 300)}
        )
        self.ctx.register.move(task, "queued", assignee=None, data=data, reason=clip(failure, 300))

    def block(
        self,
        task: Task,
        reason: str,
        *,
        question: str | None = None,
        data: AttemptData | None = None,
    ) -> None:
        """Send the task to a person: ``blocked``, in the inbox, with the question."""
        data = (data or task.data).with_(dispatched_at=None)
        if question:
            data = data.with_(question=question)
        self.ctx.register.move(task, "blocked", assignee=None, data=data, reason=reason[:REASON_LIMIT])
        self.ctx.event("inbox.added", {"task_id": task.task_id, "reason": reason[:REASON_LIMIT]})

    def fail(
        self, task: Task, reason: str, *, data: AttemptData | None = None, by: str = ""
    ) -> None:
        """Stop the task for good: ``failed``, in the inbox. ``by``: the hook that
        stopped it (a feature logs its own event for why, e.g. ``budget.exceeded``)."""
        data = (data or task.data).with_(dispatched_at=None)
        why = reason[:REASON_LIMIT]
        self.ctx.register.move(task, "failed", assignee=None, data=data, reason=why)
        self.ctx.event(
            "task.stopped", {"task_id": task.task_id, "reason": why, "by": by or "leader"}
        )
        self.ctx.event("inbox.added", {"task_id": task.task_id, "reason": why})

    def finish(self, task: Task, reason: str) -> None:
        """Accept a task in review: ``done``."""
        self.ctx.register.move(task, "done", reason=reason[:REASON_LIMIT])

    # --- helpers ------------------------------------------------------------------------

    def _charge_judges(self, task: Task, mark: Mark) -> Task:
        """Log what judge models spent on this result in the task's spend, where the
        budgets and ``tenure status`` count it."""
        ctx = self.ctx
        spent = ctx.trust.meter.since(mark)
        if spent is None:
            return task
        task = ctx.register.get(task.task_id)  # a hook may have moved it meanwhile
        if task.state in ("done", "cancelled"):
            return task
        data = log_extra(task.data, "judge", spent, task.attempt)
        return ctx.register.move(task, task.state, data=data)

    def _given_up(self, task: Task) -> AttemptData:
        """The task's data with its current attempt charged if no result logged it (the
        leader gives up on it: a deadline, a silent worker): its wall time, and what its
        worker's ``model.call`` events say it spent since it was dispatched."""
        data = task.data
        if data.dispatched_at is None or task.attempt < 1 or logged(data, task.attempt):
            return data
        spent = None
        if data.dispatched_seq is not None:
            spent = logged_calls(
                self.ctx.store,
                self.ctx.team,
                task.task_id,
                task.attempt,
                member=task.assignee,
                after=data.dispatched_seq,
            )
        return with_wall(data, task.attempt, self.ran(task), member=task.assignee, spent=spent)

    def _late(self, task: Task, result: TaskResult, sender: str | None) -> bool:
        """A result of an attempt the leader gave up on (its worker stopped late, or came
        back): its spend is charged to the task, nothing else. True if it was one."""
        attempt = _attempt_of(result.idempotency_key, task.task_id)
        entry = awaiting_entry(task.data, attempt) if attempt else None
        if attempt is None or entry is None:
            return False
        if sender is not None and entry.member is not None and sender != entry.member:
            return False  # not from the worker that had it: refused below
        ctx = self.ctx
        usage = result.usage
        info: dict[str, object] = {
            "task_id": task.task_id,
            "key": result.idempotency_key,
            "member": sender or entry.member,
            "tokens": (usage.input_tokens + usage.output_tokens) if usage else 0,
            "cost_usd": usage.cost_usd if usage else 0.0,
        }
        if task.state in ("done", "cancelled"):  # the register keeps no more for it
            ctx.event("leader.late_result", {**info, "charged": False})
            return True
        try:
            ctx.register.move(task, task.state, data=charge_late(task.data, attempt, usage))
        except Conflict:
            ctx.event("leader.late_result", {**info, "charged": False})
            return True
        ctx.event("leader.late_result", {**info, "charged": True})
        return True

    def ran(self, task: Task) -> float:
        """Wall seconds of the current attempt so far, by the store's clock."""
        started = task.data.dispatched_at
        return self.ctx.now() - (started if started is not None else task.updated_at)


def _attempt_of(key: str, task_id: str) -> int | None:
    """The attempt number of ``<task_id>:attempt-<n>``, or None."""
    prefix = f"{task_id}:attempt-"
    if not key.startswith(prefix) or not key[len(prefix) :].isdigit():
        return None
    return int(key[len(prefix) :])


def _failure_text(result: TaskResult) -> str:
    parts = list(result.notes.uncertain)
    for item in result.evidence:
        if isinstance(item, CommandEvidence) and item.exit_code != 0:
            parts.append(f"$ {item.command} (exit {item.exit_code})\n{item.output}")
    return "\n".join(parts) or "the worker reported failure without a reason"


class Judging:
    """The judgement half of a ``LeaderContext``, handed to its ``reviewer``."""

    reviewer: Reviewer

    def review(self, task: Task) -> None:
        self.reviewer.review(task)

    def retry(self, task: Task, status: str, failure: str) -> None:
        self.reviewer.retry(task, status, failure)

    def block(
        self, task: Task, reason: str, *, question: str | None = None, data: AttemptData | None = None
    ) -> None:
        self.reviewer.block(task, reason, question=question, data=data)

    def fail(
        self, task: Task, reason: str, *, data: AttemptData | None = None, by: str = ""
    ) -> None:
        self.reviewer.fail(task, reason, data=data, by=by)

    def finish(self, task: Task, reason: str) -> None:
        self.reviewer.finish(task, reason)
