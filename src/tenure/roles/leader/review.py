"""The leader's judgement of a result: verify, accept, retry with history, or escalate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tenure.models.meter import Mark
from tenure.protocol import CommandEvidence, TaskResult, idempotency_key, to_dict
from tenure.protocol.errors import Conflict
from tenure.roles.features import budget
from tenure.roles.features.nested.parent import stale_report
from tenure.roles.leader.ladder import run_ladder
from tenure.store import Store, TaskRecord, TaskState
from tenure.verify import Trust

FAILURE_LIMIT = 2000


class Reviewer:
    def __init__(
        self,
        store: Store,
        team: str,
        epoch: Callable[[], int],
        *,
        workdir: Path | None,
        on_event: Callable[[str, dict[str, Any]], None],
        splitter: Any = None,
        trust: Trust | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.epoch = epoch
        self.workdir = workdir
        self.event = on_event
        self.splitter = splitter  # a roles.split.Splitter: split once before the inbox
        # judge models for the ladder; its meter says what they spent on each result
        self.trust = trust if trust is not None else Trust()

    def on_result(self, result: TaskResult, sender: str | None = None) -> None:
        """Take a result into review, unless it is a duplicate, from an old attempt,
        or from a member the attempt was not assigned to."""
        task = self.store.get_task(self.team, result.task_id)
        current_key = idempotency_key(task.task_id, task.attempt)
        info = {"task_id": task.task_id, "key": result.idempotency_key}
        if sender is not None and task.assignee is not None and sender != task.assignee:
            self.event(
                "leader.result_refused",
                {
                    **info,
                    "sender": sender,
                    "reason": f"the attempt is assigned to {task.assignee}, not {sender}",
                },
            )
            return
        stale = stale_report(self.store, self.team, task, result) if task.spec.get("team") else None
        if stale:  # a sub-leader superseded inside its own team, whoever it claims to be
            self.event("leader.result_refused", {**info, "sender": sender, "reason": stale})
            return
        if result.idempotency_key != current_key or task.state != "running":
            self.event("leader.duplicate_absorbed", {**info, "state": task.state})
            return
        try:
            task = self.store.transition(
                self.team,
                task.task_id,
                epoch=self.epoch(),
                expect=["running"],
                to="review",
                version=task.version,
                result=to_dict(result),
                data=budget.log_attempt(task.data, task.attempt, result.usage, self._ran(task)),
            )
        except Conflict:
            self.event("leader.duplicate_absorbed", {**info, "state": "changed"})
            return
        self.review(task)

    def review(self, task: TaskRecord) -> None:
        result = TaskResult.model_validate(task.result)
        if result.status == "completed":
            self._verify(task, result)
        elif result.status == "failed":
            failure = _failure_text(result)
            if failure.startswith(budget.PREFIX):  # the worker ran out of budget: no retry
                self.fail(task, failure.splitlines()[0])
            else:
                self.retry(task, "failed", failure)
        elif result.status == "blocked":
            self.block(task, f"question: {result.question}", question=result.question)
        else:
            reason = "; ".join(result.notes.uncertain) or "no reason given"
            self.block(task, f"refused: {reason}")

    def _verify(self, task: TaskRecord, result: TaskResult) -> None:
        mark = self.trust.meter.mark()
        verdicts = run_ladder(self, task, result)  # every verdict is logged there
        task = self._charge_judges(task, mark, moved=verdicts is None)
        if verdicts is None:
            return  # the team's tie-break policy sent it to a person
        failing = [v for v in verdicts if not v.passed]
        if failing:
            self.retry(task, "rejected", f"{failing[0].check} check failed: {failing[0].reason}")
            return
        summary = ", ".join(v.check for v in verdicts)
        self._move(task, "done", reason=f"accepted: {summary}")

    def retry(self, task: TaskRecord, status: str, failure: str) -> None:
        """A new attempt with the failure in its history, or the inbox when out of tries."""
        history = [
            *task.data.get("history", []),
            {
                "attempt": max(task.attempt, 1),
                "status": status,
                "failure": failure[-FAILURE_LIMIT:],
            },
        ]
        data = budget.with_wall(task.data, task.attempt, self._ran(task))
        data = {**data, "history": history}
        data.pop("dispatched_at", None)
        stop = budget.stop_reason(
            replace(task, data=data), self.store.tasks(self.team), self.store.now()
        )
        if stop:
            self.fail(task, f"{stop}; last failure: {failure}", data=data)
            return
        used = task.attempt - int(task.data.get("attempt_base", 0))
        if used >= int(task.spec.get("max_attempts", 3)):
            if self.splitter is not None and self.splitter.split(self, task, failure, data):
                return
            self.block(task, f"gave up after {used} attempts: {failure}", data=data)
            return
        self.event(
            "task.retry", {"task_id": task.task_id, "attempt": task.attempt, "why": failure[:300]}
        )
        self._move(task, "queued", assignee=None, data=data, reason=failure[:300])

    def block(
        self,
        task: TaskRecord,
        reason: str,
        *,
        question: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        data = dict(data if data is not None else task.data)
        data.pop("dispatched_at", None)
        if question:
            data["question"] = question
        self._move(task, "blocked", assignee=None, data=data, reason=reason[:500])
        self.event("inbox.added", {"task_id": task.task_id, "reason": reason[:500]})

    def fail(self, task: TaskRecord, reason: str, *, data: dict[str, Any] | None = None) -> None:
        """Stop the task for good (a budget ran out): ``failed``, in the inbox, the reason kept."""
        data = dict(data if data is not None else task.data)
        data.pop("dispatched_at", None)
        self._move(task, "failed", assignee=None, data=data, reason=reason[:500])
        self.event("budget.exceeded", {"task_id": task.task_id, "reason": reason[:500]})
        self.event("inbox.added", {"task_id": task.task_id, "reason": reason[:500]})

    def _charge_judges(self, task: TaskRecord, mark: Mark, *, moved: bool) -> TaskRecord:
        """Log what judge models spent on this result in the task's spend, where the
        budgets and ``tenure status`` count it (``moved``: the ladder already moved it)."""
        spent = self.trust.meter.since(mark)
        if spent is None:
            return task
        if moved:
            task = self.store.get_task(self.team, task.task_id)
        if task.state in ("done", "cancelled"):
            return task
        data = budget.log_extra(task.data, "judge", spent, task.attempt)
        return self.store.transition(
            self.team,
            task.task_id,
            epoch=self.epoch(),
            expect=[task.state],
            to=task.state,
            version=task.version,
            data=data,
        )

    def _ran(self, task: TaskRecord) -> float:
        """Wall seconds of the current attempt so far, by the store's clock."""
        return self.store.now() - float(task.data.get("dispatched_at", task.updated_at))

    def _move(self, task: TaskRecord, to: TaskState, **changes: Any) -> None:
        self.store.transition(
            self.team,
            task.task_id,
            epoch=self.epoch(),
            expect=[task.state],
            to=to,
            version=task.version,
            **changes,
        )


def _failure_text(result: TaskResult) -> str:
    parts = list(result.notes.uncertain)
    for item in result.evidence:
        if isinstance(item, CommandEvidence) and item.exit_code != 0:
            parts.append(f"$ {item.command} (exit {item.exit_code})\n{item.output}")
    return "\n".join(parts) or "the worker reported failure without a reason"
