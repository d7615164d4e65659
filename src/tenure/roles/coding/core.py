"""The coding leader's state (the plan, the status rows, the run's worktrees and folder) and
what changes the rows: readiness, blocked dependents, a failed attempt, a split; and the
fenced commit every change goes through."""

from __future__ import annotations

import threading
from typing import Any

from tenure.coord import LeaseTiming
from tenure.executors import git
from tenure.executors.worktrees import TENURE_DIR, Worktrees
from tenure.protocol import PlanTask
from tenure.protocol.errors import LeaseLost
from tenure.roles.coding.config import CodingConfig, new_run_id, preflight
from tenure.roles.coding.files import (
    BLOCKED,
    MERGED,
    NEEDS_OPERATOR,
    PENDING,
    SPLIT,
    RunFolder,
    StatusRow,
    now,
)
from tenure.roles.coding.register import RunRegister, default_store_url
from tenure.roles.coding.scope import check_tasks, merge_order
from tenure.roles.coding.split import split_plan


class LeaderCore:
    def __init__(self, config: CodingConfig) -> None:
        self.config = config
        self.plan = config.plan
        self.root = preflight(config)
        self.run_id = config.run_id or new_run_id()
        self.integration = f"tenure/{self.run_id}/integration"
        self.trees = Worktrees(self.root, self.run_id, port_first=config.port_first)
        self.int_path = self.trees.root / "integration"
        self.folder = RunFolder(self.int_path, self.run_id)
        self.attempts_dir = self.root / TENURE_DIR / "attempts" / self.run_id
        self.rows: dict[str, StatusRow] = {}
        self.free_slots = list(range(config.workers))
        self.lock = threading.Lock()
        self.order = merge_order(self.plan)
        self.cancels: dict[str, threading.Event] = {}
        self.cancel_reason = ""  # a replan's, for the attempts it cancels
        self.cancel_why: dict[str, str] = {}  # an operator's, per cancelled task
        url = config.store_url or default_store_url(self.root)
        self.register = RunRegister(url, self.run_id, LeaseTiming(ttl=config.lease_ttl))
        self.tip: str | None = None  # the integration commit this leader made last
        self._rebuild = False  # the store had no register for a run git has

    def _fence(self) -> int:
        """The epoch to act under. ``LeaseLost`` once this leader's lease deadline passed,
        or when the integration branch moved under it (another leader committed)."""
        epoch = self.register.fence()
        if self.tip is not None and git.head(self.int_path) != self.tip:
            raise LeaseLost(
                f"run {self.run_id}: {self.integration} moved under this leader (epoch "
                f"{epoch}); another leader took over"
            )
        return epoch

    def _commit(self, message: str) -> None:
        """Commit the run folder, fenced, then mirror the rows into the register."""
        epoch = self._fence()
        if self.rows:  # always this leader's rows, whatever else wrote the file
            self.folder.write_status(self.rows)
        # only the run folder (even where the repository ignores .tenure/): what the
        # final checks leave in the integration worktree is never committed
        git.commit_all(
            self.int_path, f"{message}\n\nTenure-Epoch: {epoch}", only=[str(self.folder.rel)]
        )
        self.tip = git.head(self.int_path)
        self.register.sync(self.rows, self._spec_for)

    def _event(self, kind: str, **data: Any) -> None:
        self.register.event(kind, data)

    def _spec_for(self, task_id: str) -> dict[str, Any]:
        """What the register shows of a task: its goal, scope and dependencies."""
        if task_id not in {t.id for t in self.plan.tasks}:
            return {"kind": "coding", "run": self.run_id}
        task = self.plan.task(task_id)
        return {
            "kind": "coding",
            "run": self.run_id,
            "goal": task.goal,
            "scope": list(task.scope),
            "depends_on": list(task.depends_on),
        }

    def _ready(self) -> list[PlanTask]:
        ready = []
        for task in self.plan.tasks:
            row = self.rows[task.id]
            if row.state != PENDING:
                continue
            if all(self.rows[d].state == MERGED for d in task.depends_on):
                ready.append(task)
        return ready

    def _block_dependents(self) -> None:
        changed = True
        while changed:
            changed = False
            for task in self.plan.tasks:
                row = self.rows[task.id]
                if row.state != PENDING:
                    continue
                stuck = [
                    d for d in task.depends_on if self.rows[d].state in (NEEDS_OPERATOR, BLOCKED)
                ]
                if stuck:
                    row.state, row.reason, row.updated_at = (
                        BLOCKED,
                        f"depends on {', '.join(stuck)}, which needs the operator",
                        now(),
                    )
                    changed = True
        # written with the next commit

    def _unblock_dependents(self) -> None:
        """Blocked tasks whose dependencies no longer need the operator wait again."""
        changed = True
        while changed:
            changed = False
            for task in self.plan.tasks:
                row = self.rows[task.id]
                stuck = (NEEDS_OPERATOR, BLOCKED)
                if row.state == BLOCKED and all(
                    self.rows[d].state not in stuck for d in task.depends_on
                ):
                    row.state, row.reason, row.updated_at = PENDING, "", now()
                    changed = True

    def _after_failure(self, task: PlanTask, row: StatusRow, reason: str) -> None:
        first = reason.strip().splitlines()[0] if reason.strip() else "failed"
        row.history.append(f"attempt {row.attempt}: {first[:200]}")
        row.updated_at = now()
        if row.attempt - row.replanned_at_attempt >= self.plan.attempts_for(task):
            row.reason = f"{row.attempt} attempts failed; last: {first[:200]}"
            if self._split(task, row):
                return
            row.state = NEEDS_OPERATOR
            self.folder.append_inbox(task.id, f"{row.reason} (branches kept for autopsy)")
        else:
            row.state, row.reason = PENDING, first[:200]

    def _split(self, task: PlanTask, row: StatusRow) -> bool:
        """Replace an exhausted task by the splitter's parts; False to go to the inbox."""
        if self.config.splitter is None or row.split_of:
            return False
        try:
            parts = self.config.splitter(task, list(row.history))
            plan, last = split_plan(self.plan, task.id, parts)
            check_tasks(self.root, plan)
        except Exception as exc:  # a model or a splitter failing sends the task to the inbox
            row.reason += f"; could not split: {str(exc)[:300]}"
            return False
        ids = [p.id for p in parts]
        row.state = SPLIT
        row.reason = f"split into {', '.join(ids)} after {row.attempt} attempts"
        for part in ids:
            self.rows[part] = StatusRow(part, split_of=task.id, updated_at=now())
        self.plan, self.order = plan, merge_order(plan)
        self.folder.replace_plan(
            plan,
            f"split {task.id} into {', '.join(ids)}",
            [f"{last} depends on the other parts and runs {task.id}'s own checks"],
        )
        return True
