"""Opening a run: start it, or resume it from ``status.yml`` in git (salvaging attempts a
stopped process left running); and applying a replan to the run's plan."""

from __future__ import annotations

from tenure.executors import git
from tenure.executors.agent_cli import kill_orphan
from tenure.protocol.codec import load_plan
from tenure.protocol.errors import ConfigError
from tenure.roles.coding.files import PENDING, RUNNING, StatusRow, now
from tenure.roles.coding.integration import LeaderIntegration
from tenure.roles.coding.replan import ReplanRequest, rederive
from tenure.roles.coding.scope import check_tasks, merge_order, overlapping_scopes


class LeaderResume(LeaderIntegration):
    def _open(self) -> None:
        if git.branch_exists(self.root, self.integration):
            if not self.int_path.exists():
                git.git(self.root, "worktree", "prune")
                git.git(self.root, "worktree", "add", "-q", str(self.int_path), self.integration)
            self.rows = self.folder.read_status() if self.folder.exists() else {}
            if (self.folder.path / "plan.md").exists():
                # the leader's own plan.md is the truth for a run (replans included)
                self.plan = load_plan(self.folder.path / "plan.md")
                self.order = merge_order(self.plan)
            for task in self.plan.tasks:
                self.rows.setdefault(task.id, StatusRow(task.id, updated_at=now()))
            self._salvage_interrupted()
            self.folder.append_changelog("run resumed from status.yml")
            self._commit("tenure: resume run")
            return
        git.worktree_add(self.root, self.int_path, self.integration, "HEAD")
        self.rows = {t.id: StatusRow(t.id, updated_at=now()) for t in self.plan.tasks}
        self.folder.write_plan(self.plan)
        for warning in overlapping_scopes(self.plan):
            self.folder.append_changelog(f"warning: {warning}")
        self.folder.write_status(self.rows)
        self._commit(f"tenure: start {self.run_id}")

    def _salvage_interrupted(self) -> None:
        """Attempts that were running when the process died: commit what they left (so
        nothing is lost) and count them as failed; the next attempt starts fresh."""
        for row in self.rows.values():
            if row.state != RUNNING:
                continue
            kill_orphan(self.attempts_dir / f"{row.id}-{row.attempt}")
            path = self.trees.path_for(row.id, row.attempt)
            if path.exists():
                git.commit_all(path, f"tenure: salvage interrupted attempt {row.attempt}")
            reason = f"attempt {row.attempt} interrupted: the leader process stopped"
            self.folder.append_attempt(row.id, row.attempt, reason)
            self._after_failure(self.plan.task(row.id), row, reason)

    def replan(self, request: ReplanRequest) -> list[str]:
        """Apply a replan with no leader running: to the files in git, for the next resume."""
        if not git.branch_exists(self.root, self.integration):
            raise ConfigError(f"no run {self.run_id!r} in {self.root} (no {self.integration})")
        self._open()
        return self._apply_replan(request)

    def _apply_replan(self, request: ReplanRequest) -> list[str]:
        check_tasks(self.root, request.plan)
        old = self.plan
        plan, notes = rederive(old, request.plan, self.rows)
        old_ids = {t.id for t in old.tasks}
        for task in plan.tasks:
            row = self.rows[task.id]
            changed = task.id not in old_ids or old.task(task.id) != task
            if row.state == PENDING and changed and self.folder.task_file(task.id).exists():
                self.folder.append_replanned(task, request.reason)
        self.plan, self.order = plan, merge_order(plan)
        mode = "cancel running" if request.cancel_running else "let running finish"
        self.folder.replace_plan(plan, f"replan ({mode}): {request.reason}", notes)
        self.folder.write_status(self.rows)
        self._commit(f"tenure: replan: {request.reason}"[:200])
        return notes
