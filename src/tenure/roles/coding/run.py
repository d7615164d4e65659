"""Where a coding run lives and how its leader writes there: the integration worktree
and the run folder in git, the team in the store, fenced commits and events.

Every commit and every event goes through ``fence()``: the leader's epoch, which
raises ``LeaseLost`` once its lease deadline passed, and a check that the
integration branch is still at the commit this leader made last (another leader
committing means this one lost the run). ``status.yml`` is rewritten from the
register at every commit, so every commit carries the committing leader's view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenure.executors import git
from tenure.executors.containment import Guard
from tenure.executors.worktrees import Worktrees
from tenure.protocol import Plan
from tenure.protocol.errors import LeaseLost
from tenure.protocol.secrets import redact_text
from tenure.roles.coding.files import RunFolder, StatusRow
from tenure.roles.coding.lease import team_for
from tenure.roles.coding.rows import rows_of
from tenure.roles.coding.scope import merge_order
from tenure.roles.coding.worker import attempts_dir
from tenure.roles.register import Register, Task
from tenure.store import Store


@dataclass
class RunPlace:
    root: Path
    run_id: str
    store: Store
    epoch: Callable[[], int]
    plan: Plan  # the run's plan, in plan order (plan.md)
    port_first: int = 20000
    tip: str | None = None  # the integration commit this leader made last
    rows: dict[str, StatusRow] = field(default_factory=dict)  # status.yml as last written
    guard: Guard | None = None  # what agents may not change (set once the run is open)

    def __post_init__(self) -> None:
        self.team = team_for(self.run_id)
        self.integration = f"tenure/{self.run_id}/integration"
        self.trees = Worktrees(self.root, self.run_id, port_first=self.port_first)
        self.int_path = self.trees.root / "integration"
        self.checkouts = self.trees.checkouts  # the leader's fresh checkouts for its checks
        self.folder = RunFolder(self.int_path, self.run_id)
        self.attempts = attempts_dir(self.root, self.run_id)
        self.register = Register(self.store, self.team, self.epoch)

    def fence(self) -> int:
        """The epoch to act under; ``LeaseLost`` once this leader lost the run."""
        epoch = self.epoch()
        if self.tip is not None and git.head(self.int_path) != self.tip:
            raise LeaseLost(
                f"run {self.run_id}: {self.integration} moved under this leader (epoch "
                f"{epoch}); another leader took over"
            )
        return epoch

    def commit(self, message: str, tasks: list[Task] | None = None) -> None:
        """Commit the run folder, fenced, with status.yml rewritten from the register."""
        epoch = self.fence()
        self.folder.epoch = epoch
        self.rows = rows_of(self.run_id, tasks if tasks is not None else self.register.tasks())
        self.folder.write_status(self.rows)
        # only the run folder (even where the repository ignores .tenure/): what the
        # final checks leave in the integration worktree is never committed
        git.commit_all(
            self.int_path,
            redact_text(f"{message}\n\nTenure-Epoch: {epoch}"),
            only=[str(self.folder.rel)],
        )
        self.tip = git.head(self.int_path)

    def event(self, kind: str, **data: Any) -> None:
        self.store.append_event(self.team, f"code.{kind}", data, epoch=self.fence())

    def order(self, tasks: list[Task]) -> list[str]:
        """Merge order: plan order, a split task replaced by its parts, dependencies first."""
        by_id = {t.task_id: t for t in tasks}
        flat: list[str] = []

        def place(task_id: str) -> None:
            task = by_id.get(task_id)
            if task is not None and task.data.split_into:
                for part in task.data.split_into:
                    place(part)
            elif task_id not in flat:
                flat.append(task_id)

        for planned in self.plan.tasks:
            place(planned.id)
        known = {t.id for t in self.plan.tasks}
        for task in tasks:  # anything registered that the plan does not name
            if task.task_id not in known and not task.spec.split_of and not task.spec.replica_of:
                place(task.task_id)
        present = [t for t in flat if t in by_id]

        def parts(task_id: str) -> list[str]:
            task = by_id.get(task_id)
            if task is None or not task.data.split_into:
                return [task_id] if task_id in present else []
            return [p for part in task.data.split_into for p in parts(part)]

        specs = [
            by_id[t].spec.plan_task().model_copy(
                update={"depends_on": [p for d in by_id[t].spec.depends_on for p in parts(d)]}
            )
            for t in present
        ]
        return merge_order(Plan.model_construct(tasks=specs))
