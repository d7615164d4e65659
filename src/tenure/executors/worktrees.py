"""One git worktree per task attempt, with its own ports and database name.

Worktrees live under ``<repo>/.tenure/worktrees/<run>/<task>-<attempt>`` (excluded
from git through ``.git/info/exclude``) on branches ``tenure/<run>/<task>/<attempt>``.
Each gets ``TENURE_PORT_BASE`` (a block of ``PORT_BLOCK`` ports of its own) and
``TENURE_DB_NAME`` so parallel dev servers and migrations do not collide.

A worktree whose branch holds commits not reachable from ``keep_ref`` (the run's
integration branch) is never removed: ``removable`` says so and ``remove`` refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tenure.executors import git
from tenure.protocol.errors import TenureError

TENURE_DIR = ".tenure"
PORT_FIRST = 20000
PORT_BLOCK = 10
# scratch space that must never be committed: worktrees, per-attempt logs and homes,
# the leader's fresh checkouts for its checks, and the report an agent writes into
# its worktree for the leader to pick up
EXCLUDED = (
    f"/{TENURE_DIR}/worktrees/",
    f"/{TENURE_DIR}/attempts/",
    f"/{TENURE_DIR}/checkouts/",
    f"/{TENURE_DIR}/result-*.md",
    f"/{TENURE_DIR}/state.db*",
)


class UnmergedWork(TenureError):
    """A worktree or branch still holds commits that are not merged anywhere safe."""


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str
    base: str  # the commit it started from
    port_base: int
    db_name: str
    dirs: git.Dirs  # its git directories, as the leader found them when it made it

    def env(self) -> dict[str, str]:
        return {
            "TENURE_WORKTREE": str(self.path),
            "TENURE_BRANCH": self.branch,
            "TENURE_PORT_BASE": str(self.port_base),
            "TENURE_PORT_COUNT": str(PORT_BLOCK),
            "TENURE_DB_NAME": self.db_name,
        }


def exclude_tenure_dir(repo: Path) -> None:
    """Keep worktrees, logs, agent homes and agent reports out of ``git status``."""
    exclude = git.common_dir(repo) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    wanted = [p for p in EXCLUDED if p not in lines]
    if wanted:
        exclude.write_text("\n".join([*lines, *wanted]) + "\n")


def db_name(run: str, task: str, attempt: int) -> str:
    raw = f"tenure_{run}_{task}_{attempt}".lower()
    return re.sub(r"[^a-z0-9_]", "_", raw)[:63]


class Worktrees:
    def __init__(self, repo: Path, run: str, *, port_first: int = PORT_FIRST) -> None:
        self.repo = repo
        self.run = run
        self.port_first = port_first
        self.root = repo / TENURE_DIR / "worktrees" / run
        self.checkouts = repo / TENURE_DIR / "checkouts" / run  # the leader's, for its checks

    def branch_for(self, task: str, attempt: int) -> str:
        return f"tenure/{self.run}/{task}/{attempt}"

    def path_for(self, task: str, attempt: int) -> Path:
        return self.root / f"{task}-{attempt}"

    def create(self, task: str, attempt: int, base: str, slot: int) -> Worktree:
        """A fresh worktree for one attempt; an existing one is reused (a resumed run)."""
        path = self.path_for(task, attempt)
        branch = self.branch_for(task, attempt)
        base_commit = git.head(self.repo, base)
        if path.exists() and git.branch_exists(self.repo, branch):
            base_commit = git.git(self.repo, "merge-base", base_commit, branch).strip()
        else:
            git.worktree_add(self.repo, path, branch, base_commit)
        return Worktree(
            path=path.resolve(),
            branch=branch,
            base=base_commit,
            port_base=self.port_first + slot * PORT_BLOCK,
            db_name=db_name(self.run, task, attempt),
            dirs=git.dirs_of(self.repo, path),
        )


@dataclass(frozen=True)
class Cleanup:
    path: Path | None
    branch: str
    removable: bool
    reason: str


def plan_cleanup(repo: Path, keep_ref: str | None = None) -> list[Cleanup]:
    """What ``tenure gc`` would do: every ``tenure/...`` worktree and branch, and whether
    its commits are all reachable from ``keep_ref`` (default: the checked-out branch)."""
    keep = keep_ref or git.current_branch(repo)
    by_branch = {b: p for p, b in git.worktrees(repo).items() if b}
    branches = git.git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/tenure/")
    found: list[Cleanup] = []
    for branch in branches.split():
        if branch.endswith("/integration"):
            merged = git.is_ancestor(repo, branch, keep)
            why = f"merged into {keep}" if merged else f"integration branch not merged into {keep}"
        else:
            run = branch.split("/")[1]
            integration = f"tenure/{run}/integration"
            targets = [keep] + ([integration] if git.branch_exists(repo, integration) else [])
            merged = any(git.is_ancestor(repo, branch, t) for t in targets)
            why = (
                f"merged into {' or '.join(targets)}"
                if merged
                else "holds commits not merged (kept for autopsy)"
            )
        found.append(Cleanup(by_branch.get(branch), branch, merged, why))
    return found


def remove(repo: Path, item: Cleanup) -> None:
    """Remove a merged worktree and its branch; refuse anything unmerged."""
    if not item.removable:
        raise UnmergedWork(f"{item.branch}: {item.reason}; not removed")
    if item.path is not None and item.path.exists():
        git.worktree_remove(repo, item.path)
    git.git(repo, "branch", "-D", item.branch)


def discard(repo: Path, path: Path | None, branch: str) -> None:
    """Remove a worktree and its branch, commits and all: only for work the operator chose
    to throw away (``tenure discard``), never for anything implicit like ``gc``."""
    if path is not None and path.exists():
        git.worktree_remove(repo, path)
    git.git(repo, "branch", "-D", branch)
