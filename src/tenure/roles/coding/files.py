"""The run folder: ``.tenure/runs/<run>/`` inside the target repository.

``plan.md``          the plan and its changelog; written by the leader only
``tasks/<id>.md``    goal, scope, acceptance checks, constraints, failed attempts,
                     and an append-only Q&A section
``results/<id>.md``  the worker's report per attempt, followed by the leader's verdicts
``status.yml``       one row per task (state, attempt, worker, branch, timestamps); the
                     leader process is the single writer of every row
``inbox.md``         tasks handed to the operator, with the reason

Everything here is committed on the run's integration branch as it happens, so
``status.yml`` in git is the run's state: a killed run resumes from it. Every
file is written through ``_write``, which redacts known secrets
(``protocol.secrets``) first: nothing a worker echoed lands in git.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tenure.protocol import CommandCheck, Plan, PlanTask
from tenure.protocol.secrets import redact_text, redact_value
from tenure.protocol.words import counted
from tenure.protocol.yaml_guard import load_yaml

RUNS_DIR = Path(".tenure") / "runs"
QA_HEADING = "## Questions and answers (append-only)"

# task states in status.yml
PENDING = "pending"
RUNNING = "running"
ACCEPTED = "accepted"
MERGED = "merged"
NEEDS_OPERATOR = "needs-operator"
BLOCKED = "blocked"
CANCELLED = "cancelled"  # cancelled by a replan, with the reason
DROPPED = "dropped"  # left out by a replan before it ran to the end
SPLIT = "split"  # replaced by its parts after its last attempt failed
FINISHED = (MERGED, NEEDS_OPERATOR, BLOCKED, CANCELLED, DROPPED, SPLIT)


def _write(path: Path, text: str) -> None:
    """Write a run file, known secrets redacted: the one way text reaches the run folder
    (YAML is redacted as data before it is dumped, so a masked value stays a string)."""
    path.write_text(redact_text(text))


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(redact_text(text))


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class StatusRow:
    id: str
    state: str = PENDING
    attempt: int = 0
    worker: str = ""
    branch: str = ""
    base: str = ""
    started_at: str = ""
    updated_at: str = ""
    reason: str = ""
    merged_branch: str = ""
    replanned_at_attempt: int = 0  # attempts before the last replan do not count
    split_of: str = ""  # the task this one is a part of (parts are never split again)
    history: list[str] = field(default_factory=list)


class RunFolder:
    def __init__(self, worktree: Path, run: str) -> None:
        self.worktree = worktree  # the integration worktree, where the folder is committed
        self.run = run
        self.rel = RUNS_DIR / run
        self.path = worktree / self.rel
        self.epoch = 0  # the leader's epoch, written into status.yml

    def task_file(self, task_id: str, root: Path | None = None) -> Path:
        return (root or self.worktree) / self.rel / "tasks" / f"{task_id}.md"

    def result_file(self, task_id: str) -> Path:
        return self.path / "results" / f"{task_id}.md"

    @property
    def status_file(self) -> Path:
        return self.path / "status.yml"

    def exists(self) -> bool:
        return self.status_file.exists()

    # --- plan.md -------------------------------------------------------------------

    def write_plan(self, plan: Plan, note: str = "") -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        data = redact_value(plan.model_dump(mode="json", exclude_none=True))  # before YAML
        lines = [
            f"# Plan: {plan.goal or plan.team}",
            "",
            f"Run `{self.run}`. Written by the leader only; tasks merge in this order.",
            "",
            "```yaml",
            yaml.safe_dump(data, sort_keys=False).rstrip(),
            "```",
            "",
            "## Changelog",
            "",
            f"- {now()} run started{': ' + note if note else ''}",
            "",
        ]
        _write(self.path / "plan.md", "\n".join(lines))

    def replace_plan(self, plan: Plan, entry: str, notes: list[str]) -> None:
        """The new plan in plan.md; the changelog is kept and gets ``entry`` and ``notes``."""
        path = self.path / "plan.md"
        _, sep, changelog = path.read_text().partition("## Changelog\n")
        self.write_plan(plan)
        if sep:
            fresh = path.read_text().partition("## Changelog\n")[0]
            _write(path, fresh + sep + changelog)
        self.append_changelog(entry)
        _append(path, "".join(f"  - {note}\n" for note in notes))

    def append_changelog(self, entry: str) -> None:
        _append(self.path / "plan.md", f"- {now()} {entry}\n")

    # --- tasks/<id>.md ---------------------------------------------------------------

    def write_task(self, task: PlanTask, plan: Plan) -> Path:
        path = self.task_file(task.id)
        if path.exists():
            return path  # append-only once written: history and Q&A are kept
        path.parent.mkdir(parents=True, exist_ok=True)
        checks = [c.run for c in task.checks if isinstance(c, CommandCheck)]
        lines = [
            f"# Task {task.id}",
            "",
            "## Goal",
            "",
            task.goal,
            "",
            "## Scope (the only paths you may change)",
            "",
            *([f"- `{s}`" for s in task.scope] or ["- (the whole repository except .tenure/)"]),
            "",
            "## Acceptance (the leader runs these on a fresh checkout of your commit; your word is not enough)",
            "",
            *[f"- `{c}`" for c in checks],
            *[f"- {c}" for c in task.acceptance_criteria],
            "",
            "## Constraints",
            "",
            f"- Deadline: {task.deadline_seconds:g}s per attempt; the process group is "
            "killed after it.",
            f"- At most {counted(plan.attempts_for(task), 'attempt')}, then the operator decides.",
            "- Do not commit; the worker commits your changes. Do not edit .tenure/.",
            *(
                [f"- Depends on: {', '.join(task.depends_on)} (already merged)"]
                if task.depends_on
                else []
            ),
            "",
            "## Attempts",
            "",
            QA_HEADING,
            "",
        ]
        _write(path, "\n".join(lines))
        return path

    def append_attempt(self, task_id: str, attempt: int, text: str) -> None:
        """Add a failed attempt's output above the Q&A section (which stays last)."""
        path = self.task_file(task_id)
        body = path.read_text()
        entry = f"### Attempt {attempt} failed ({now()})\n\n```\n{text.rstrip()[-3000:]}\n```\n\n"
        head, sep, tail = body.partition(QA_HEADING)
        _write(path, head + entry + sep + tail if sep else body + "\n" + entry)

    def append_replanned(self, task: PlanTask, reason: str) -> None:
        """A re-derived task's new definition, above the Q&A section."""
        checks = [c.run for c in task.checks if isinstance(c, CommandCheck)]
        text = (
            f"### Replanned ({now()}): {reason}\n\nGoal: {task.goal}\n\n"
            f"Scope: {', '.join(f'`{s}`' for s in task.scope) or '(whole repository)'}\n\n"
            f"Checks: {', '.join(f'`{c}`' for c in checks)}\n\n"
        )
        path = self.task_file(task.id)
        body = path.read_text()
        head, sep, tail = body.partition(QA_HEADING)
        _write(path, head + text + sep + tail if sep else body + "\n" + text)

    # --- results/<id>.md -------------------------------------------------------------

    def append_result(self, task_id: str, attempt: int, report: str, verdicts: str) -> None:
        path = self.result_file(task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text() if path.exists() else f"# Results for {task_id}\n\n"
        shown = report.strip() or "(the agent wrote no report)"
        _write(
            path,
            f"{old}## Attempt {attempt} ({now()})\n\n### Worker's report\n\n{shown}\n\n"
            f"### Leader's acceptance\n\n{verdicts.rstrip()}\n\n",
        )

    def append_answer(self, task_id: str, question: str, answer: str) -> None:
        """An operator's answer, at the end of the task file (the Q&A section is last)."""
        path = self.task_file(task_id)
        body = path.read_text() if path.exists() else f"# Task {task_id}\n\n{QA_HEADING}\n\n"
        if QA_HEADING not in body:
            body += f"\n{QA_HEADING}\n\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(
            path,
            f"{body.rstrip()}\n\n### Q ({now()})\n\n{question.strip() or '(no question)'}\n\n"
            f"**A (operator):** {answer.strip()}\n",
        )

    def append_inbox(self, task_id: str, reason: str) -> None:
        path = self.path / "inbox.md"
        old = path.read_text() if path.exists() else "# Operator inbox\n\n"
        _write(path, f"{old}- {now()} **{task_id}**: {reason}\n")

    # --- status.yml -------------------------------------------------------------------

    def write_status(self, rows: dict[str, StatusRow]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"run": self.run}
        if self.epoch:  # the writer's fencing epoch: the next leader claims above it
            data["epoch"] = self.epoch
        data["tasks"] = [asdict(r) for r in rows.values()]
        _write(self.status_file, yaml.safe_dump(redact_value(data), sort_keys=False))

    def read_status(self) -> dict[str, StatusRow]:
        return parse_status(self.status_file.read_text())


def parse_status(text: str) -> dict[str, StatusRow]:
    data = load_yaml(text, source="status.yml") or {}
    return {row["id"]: StatusRow(**row) for row in data.get("tasks", [])}


def status_epoch(text: str) -> int:
    """The fencing epoch of the leader that wrote this status.yml (0 before there was one)."""
    data = load_yaml(text, source="status.yml") or {}
    return int(data.get("epoch", 0))
