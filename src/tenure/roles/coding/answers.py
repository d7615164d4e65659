"""The operator's word through the store.

``tenure answer --team code/RUN TASK TEXT`` re-queues the task's register record with
the answer in ``data.qa``; the leader takes it from there into the task file's
append-only Q&A section (committed) and gives the task fresh attempts.
``tenure cancel --team code/RUN TASK`` cancels the record; the leader stops the task
too (a running attempt's agent is stopped, its worktree and branch kept)."""

from __future__ import annotations

from tenure.roles.coding.files import (
    CANCELLED,
    DROPPED,
    MERGED,
    NEEDS_OPERATOR,
    PENDING,
    RUNNING,
    SPLIT,
    now,
)
from tenure.roles.coding.integration import LeaderIntegration


class LeaderAnswers(LeaderIntegration):
    def _take_answers(self) -> list[str]:
        """Take every answer not yet in a task file; returns the tasks answered."""
        found = self.register.answers()
        if not found:
            return []
        self._fence()
        answered: list[str] = []
        for task_id, entries in found.items():
            row = self.rows.get(task_id)
            self.register.taken(task_id, self.register.qa_seen.get(task_id, 0) + len(entries))
            if row is None:
                continue  # a record of no task in this run: nothing to hand it to
            if task_id in {t.id for t in self.plan.tasks}:  # answered before its dispatch
                self.folder.write_task(self.plan.task(task_id), self.plan)
            for entry in entries:
                question = str(entry.get("question") or row.reason)
                self.folder.append_answer(task_id, question, str(entry.get("answer", "")))
                row.history.append(f"answered by the operator: {entry.get('answer', '')}"[:250])
            if row.state == NEEDS_OPERATOR:
                # a fresh allowance of attempts, like a replan: earlier ones do not count
                row.state, row.reason = PENDING, "answered by the operator"
                row.replanned_at_attempt = row.attempt
            row.updated_at = now()
            answered.append(task_id)
        if not answered:
            return []
        self._unblock_dependents()
        self._commit(f"tenure: operator answered {', '.join(answered)}")
        for task_id in answered:
            texts = [str(e.get("answer", "")) for e in found[task_id]]
            self._event("answered", task_id=task_id, answers=texts, now=self.rows[task_id].state)
        return answered

    def _take_cancels(self) -> list[str]:
        """Stop every task an operator cancelled in the register; returns those settled
        now (a running one settles when its agent has stopped)."""
        settled: list[str] = []
        for task_id, reason in self.register.cancelled().items():
            row = self.rows.get(task_id)
            if row is None or row.state in (CANCELLED, DROPPED, SPLIT, MERGED):
                continue  # the leader's own mirror, or too late: merged work stays merged
            why = f"cancelled by the operator: {reason}"
            if row.state == RUNNING:
                cancel = self.cancels.get(task_id)
                if cancel is not None and not cancel.is_set():
                    self.cancel_why[task_id] = why
                    cancel.set()
                continue
            row.state, row.reason, row.updated_at = CANCELLED, why, now()
            row.history.append(why[:250])
            settled.append(task_id)
        if settled:
            self._fence()
            self.folder.write_status(self.rows)
            self._commit(f"tenure: operator cancelled {', '.join(settled)}")
            for task_id in settled:
                self._event("cancelled", task_id=task_id, reason=self.rows[task_id].reason)
        return settled
