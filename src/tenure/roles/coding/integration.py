"""Integration: merge accepted attempts into the run's integration branch in plan order, and
finish the run with every task's checks run together on that branch."""

from __future__ import annotations

from tenure.executors import git
from tenure.protocol import CommandCheck
from tenure.roles.coding.config import CodingOutcome
from tenure.roles.coding.core import LeaderCore
from tenure.roles.coding.files import ACCEPTED, FINISHED, MERGED, now
from tenure.verify.checks import Verdict, check_command


class LeaderIntegration(LeaderCore):
    def _merge_in_order(self) -> None:
        for task_id in self.order:
            row = self.rows[task_id]
            if row.state in FINISHED:
                continue
            if row.state != ACCEPTED:
                return  # plan order: a later task waits for the earlier one
            epoch = self._fence()
            merged, report = git.merge(
                self.int_path,
                row.branch,
                f"tenure: merge {task_id} ({row.branch})\n\nTenure-Epoch: {epoch}",
            )
            task = self.plan.task(task_id)
            row.updated_at = now()
            if merged:
                self.tip = git.head(self.int_path)  # this leader's own merge commit
                row.state, row.merged_branch = MERGED, row.branch
                self.folder.write_status(self.rows)
                self._commit(f"tenure: {task_id} merged")
                self._event("merged", task_id=task_id, branch=row.branch, attempt=row.attempt)
                continue
            text = (
                f"{report}\nRedo the task on top of the integration branch; "
                "do not pick a side blindly."
            )
            self.folder.append_attempt(task_id, row.attempt, text)
            self._after_failure(task, row, report)
            self.folder.write_status(self.rows)
            self._commit(f"tenure: {task_id} conflicts with the integration branch")
            first = report.splitlines()[0] if report else "conflict"
            self._event("conflict", task_id=task_id, attempt=row.attempt, reason=first[:300])

    def _finish(self, *, stopped: bool) -> CodingOutcome:
        self._block_dependents()
        self.folder.write_status(self.rows)
        self._commit("tenure: status")
        states = {k: r.state for k, r in self.rows.items()}
        in_plan = {t.id: self.rows[t.id].state for t in self.plan.tasks}
        verdicts: list[Verdict] = []
        if stopped:
            reason = "stopped; resume with the same run id"
            done = False
        elif any(s != MERGED for s in in_plan.values()):
            waiting = [k for k, s in in_plan.items() if s != MERGED]
            reason = f"not merged: {', '.join(waiting)} (see status.yml and inbox.md)"
            done = False
        else:
            for task in self.plan.tasks:
                for check in task.checks:
                    if isinstance(check, CommandCheck):
                        verdicts.append(check_command(check, self.int_path))
            failed = [v for v in verdicts if not v.passed]
            done = not failed
            reason = (
                "every task merged and all checks pass together on the integration branch"
                if done
                else "integration checks failed: " + failed[0].reason
            )
            self.folder.append_changelog(("done: " if done else "not done: ") + reason[:500])
            self._commit("tenure: run " + ("done" if done else "failed integration checks"))
        self._event("finished", done=done, reason=reason[:500])
        return CodingOutcome(
            self.run_id, done, self.integration, self.int_path, states, reason, verdicts
        )
