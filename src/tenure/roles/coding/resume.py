"""Opening a run: claim its lease, then start it, or resume it from ``status.yml`` in git
(salvaging attempts a stopped process left running; rebuilding the store's register from
the file when the store lost the run); and applying a replan to the run's plan."""

from __future__ import annotations

from tenure.executors import git
from tenure.executors.agent_cli import kill_orphan
from tenure.protocol.codec import load_plan
from tenure.protocol.errors import ConfigError
from tenure.roles.coding.answers import LeaderAnswers
from tenure.roles.coding.files import PENDING, RUNNING, StatusRow, now, status_epoch
from tenure.roles.coding.replan import ReplanRequest, rederive
from tenure.roles.coding.scope import check_tasks, merge_order, overlapping_scopes


class LeaderResume(LeaderAnswers):
    def claim(self) -> int:
        """Take the run's lease before touching anything (``RunLeased`` while another
        leader holds it), above every epoch status.yml in git records."""
        if self.register.keeper is not None and self.register.keeper.lease is not None:
            return self.register.epoch
        text = ""
        if git.branch_exists(self.root, self.integration):
            path = f"{self.integration}:{self.folder.rel.as_posix()}/status.yml"
            text = git.git(self.root, "show", path, check=False)
        epoch = self.register.claim(at_least=status_epoch(text) if text else 0)
        self.folder.epoch = epoch
        self._rebuild = bool(text) and not self.register.tasks()
        return epoch

    def _open(self) -> None:
        self.claim()
        if git.branch_exists(self.root, self.integration):
            if not self.int_path.exists():
                git.git(self.root, "worktree", "prune")
                git.git(self.root, "worktree", "add", "-q", str(self.int_path), self.integration)
            self.tip = git.head(self.int_path)
            self.rows = self.folder.read_status() if self.folder.exists() else {}
            if (self.folder.path / "plan.md").exists():
                # the leader's own plan.md is the truth for a run (replans included)
                self.plan = load_plan(self.folder.path / "plan.md")
                self.order = merge_order(self.plan)
            for task in self.plan.tasks:
                self.rows.setdefault(task.id, StatusRow(task.id, updated_at=now()))
            interrupted = self._salvage_interrupted()
            note = "; the store had lost it: register rebuilt from status.yml" * self._rebuild
            epoch = self.folder.epoch
            self.folder.append_changelog(f"run resumed from status.yml (epoch {epoch}){note}")
            self._commit("tenure: resume run")
            kind = "rebuilt" if self._rebuild else "resumed"
            self._event(
                kind, tasks=len(self.rows), source="status.yml", holder=self.register.holder
            )
            for task_id, attempt in interrupted:
                self._event("interrupted", task_id=task_id, attempt=attempt)
            return
        git.worktree_add(self.root, self.int_path, self.integration, "HEAD")
        self.tip = git.head(self.int_path)
        self.rows = {t.id: StatusRow(t.id, updated_at=now()) for t in self.plan.tasks}
        self.folder.write_plan(self.plan)
        for warning in overlapping_scopes(self.plan):
            self.folder.append_changelog(f"warning: {warning}")
        self.folder.write_status(self.rows)
        self._commit(f"tenure: start {self.run_id}")
        self._event("started", tasks=len(self.rows), holder=self.register.holder)

    def _salvage_interrupted(self) -> list[tuple[str, int]]:
        """Attempts that were running when the process died: commit what they left (so
        nothing is lost) and count them as failed; the next attempt starts fresh."""
        found: list[tuple[str, int]] = []
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
            found.append((row.id, row.attempt))
        return found

    def replan(self, request: ReplanRequest) -> list[str]:
        """Apply a replan with no leader running: to the files in git, for the next resume."""
        if not git.branch_exists(self.root, self.integration):
            raise ConfigError(f"no run {self.run_id!r} in {self.root} (no {self.integration})")
        try:
            self._open()
            self._take_answers()
            return self._apply_replan(request)
        finally:
            self.register.release()

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
        self._event("replanned", reason=request.reason, mode=mode, changes=notes)
        return notes
