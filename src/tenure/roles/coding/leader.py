"""The coding leader: dispatch each task attempt into its own worktree, accept it only on
checks the leader runs itself in that worktree, enforce scope, merge in plan order.

Every step is committed to the run's integration branch ``tenure/<run>/integration``
(dispatch → task file + status row; return → results file + status row; merge), so
``status.yml`` in git is the state and a killed run resumes from it.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from tenure.executors import git
from tenure.executors.agent_cli import AgentCLI, kill_orphan
from tenure.executors.worktrees import TENURE_DIR, Worktree, Worktrees, exclude_tenure_dir
from tenure.protocol import CommandCheck, Plan, PlanTask
from tenure.protocol.codec import load_plan
from tenure.protocol.errors import ConfigError, ProtocolError, TenureError
from tenure.protocol.ids import check_task_id
from tenure.roles.coding.files import (
    ACCEPTED,
    BLOCKED,
    CANCELLED,
    FINISHED,
    MERGED,
    NEEDS_OPERATOR,
    PENDING,
    RUNNING,
    SPLIT,
    RunFolder,
    StatusRow,
    now,
)
from tenure.roles.coding.replan import PID_FILE, REQUEST_FILE, ReplanRequest, rederive
from tenure.roles.coding.split import split_plan
from tenure.verify.checks import Verdict, check_command


@dataclass
class CodingConfig:
    repo: Path
    plan: Plan
    agent: AgentCLI
    workers: int = 2
    run_id: str | None = None  # None: a new run named after the time
    port_first: int = 20000
    check_installed: bool = True
    # split(task, failures) -> parts, tried once before the inbox (see coding.split)
    splitter: Callable[[PlanTask, list[str]], list[PlanTask]] | None = None


@dataclass
class CodingOutcome:
    run: str
    done: bool
    integration_branch: str
    integration_worktree: Path
    states: dict[str, str]
    reason: str = ""
    final_checks: list[Verdict] = field(default_factory=list)


@dataclass
class _Attempt:
    task: PlanTask
    number: int
    worktree: Worktree
    slot: int


@dataclass
class _Return:
    attempt: _Attempt
    accepted: bool
    reason: str
    report: str
    verdicts: str


def new_run_id() -> str:
    return "run-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def preflight(config: CodingConfig) -> Path:
    """Refuse bad input before any worktree exists; return the repository root."""
    root = git.repo_root(config.repo)
    if config.run_id is not None:
        check_task_id(config.run_id, "run")
    integration = f"tenure/{config.run_id}/integration" if config.run_id else ""
    resuming = bool(integration) and git.branch_exists(root, integration)
    if not resuming:
        exclude_tenure_dir(root)
        git.require_clean(root)
        if not git.ok(root, "rev-parse", "--verify", "HEAD"):
            raise ConfigError(f"{root} has no commit yet; commit something first")
    if config.check_installed:
        config.agent.check_installed()
    if config.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {config.workers}")
    check_tasks(root, config.plan)
    return root


def check_tasks(root: Path, plan: Plan) -> None:
    """Every task: a safe id, a scope inside the repository, a command check."""
    for index, task in enumerate(plan.tasks):
        check_task_id(task.id, f"tasks[{index}].id")
        for j, scope in enumerate(task.scope):
            check_scope(root, scope, f"tasks[{index}].scope[{j}]")
        if not any(isinstance(c, CommandCheck) for c in task.checks):
            raise ProtocolError(
                f"tasks[{index}].checks",
                f"at least one command check for {task.id!r}: the leader accepts a coding "
                "task only on commands it runs itself in the worktree",
            )


def check_scope(root: Path, scope: str, field_name: str) -> None:
    pure = PurePosixPath(scope)
    normal = posixpath.normpath(scope)
    if pure.is_absolute() or normal == ".." or normal.startswith("../"):
        raise ProtocolError(field_name, f"a path inside the repository {root}; got {scope!r}")
    if not (root / normal).resolve().is_relative_to(root):
        raise ProtocolError(field_name, f"{scope!r} resolves outside the repository {root}")
    first = normal.split("/")[0]
    if first in (".git", TENURE_DIR):
        raise ProtocolError(field_name, f"a path outside {first}/ (reserved); got {scope!r}")


def in_scope(path: str, scopes: list[str]) -> bool:
    if path.split("/")[0] in (TENURE_DIR, ".git"):
        return False
    if not scopes:
        return True
    for scope in scopes:
        normal = posixpath.normpath(scope).rstrip("/")
        if normal in ("", "."):
            return True
        if path == normal or path.startswith(normal + "/") or fnmatch.fnmatchcase(path, scope):
            return True
    return False


class CodingLeader:
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
        self.cancel_reason = ""

    # --- setup and resume ------------------------------------------------------------

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

    def _commit(self, message: str) -> None:
        # only the run folder (even where the repository ignores .tenure/): what the
        # final checks leave in the integration worktree is never committed
        git.commit_all(self.int_path, message, only=[str(self.folder.rel)])

    # --- the loop ----------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> CodingOutcome:
        stop = stop or threading.Event()
        self._open()
        pid_file = self.attempts_dir / PID_FILE
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{os.getpid()}\n")
        try:
            return self._loop(stop)
        finally:
            pid_file.unlink(missing_ok=True)

    def _loop(self, stop: threading.Event) -> CodingOutcome:
        running: dict[Future[_Return], _Attempt] = {}
        with ThreadPoolExecutor(max_workers=self.config.workers) as pool:
            while not stop.is_set():
                try:
                    request = ReplanRequest.read(self.attempts_dir)
                except (ValueError, KeyError, TypeError) as exc:  # unreadable: refuse it
                    self.folder.append_changelog(f"replan refused (unreadable request): {exc}")
                    self._commit("tenure: replan refused")
                    (self.attempts_dir / REQUEST_FILE).unlink(missing_ok=True)
                    continue
                if request is None:  # a pending replan freezes dispatch
                    self._block_dependents()
                    for task in self._ready():
                        if not self.free_slots:
                            break
                        attempt = self._dispatch(task)
                        running[pool.submit(self._work, attempt)] = attempt
                elif request.cancel_running:
                    self.cancel_reason = request.reason
                    for attempt in running.values():
                        self.cancels[attempt.task.id].set()
                self._merge_in_order()
                if not running:
                    if request is not None:
                        try:
                            self._apply_replan(request)
                        except TenureError as exc:  # a bad replan never ends the run
                            self.folder.append_changelog(f"replan refused: {exc}")
                            self._commit("tenure: replan refused")
                        (self.attempts_dir / REQUEST_FILE).unlink(missing_ok=True)
                        continue
                    if all(self.rows[t.id].state in FINISHED for t in self.plan.tasks):
                        break
                    if not self._ready():
                        break
                    continue
                done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for future in done:
                    attempt = running.pop(future)
                    self.free_slots.append(attempt.slot)
                    self._returned(attempt, future)
            if stop.is_set():
                # end the agents now; their rows stay "running", so a resume salvages
                # what they left and counts them as interrupted
                for attempt in running.values():
                    self.cancels[attempt.task.id].set()
        return self._finish(stopped=stop.is_set())

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

    def _dispatch(self, task: PlanTask) -> _Attempt:
        row = self.rows[task.id]
        row.attempt += 1
        slot = self.free_slots.pop(0)
        row.state, row.worker = RUNNING, f"worker-{slot + 1}"
        row.branch = self.trees.branch_for(task.id, row.attempt)
        row.started_at = row.updated_at = now()
        row.reason = ""
        self.folder.write_task(task, self.plan)
        self.folder.write_status(self.rows)
        self._commit(f"tenure: dispatch {task.id} attempt {row.attempt} to {row.worker}")
        tree = self.trees.create(task.id, row.attempt, self.integration, slot)
        row.base = tree.base
        self.cancels[task.id] = threading.Event()
        return _Attempt(task, row.attempt, tree, slot)

    def _work(self, attempt: _Attempt) -> _Return:
        """One attempt, on a worker thread: the agent, then the leader's own checks."""
        task, tree = attempt.task, attempt.worktree
        result_file = tree.path / TENURE_DIR / f"result-{task.id}.md"
        run = self.config.agent.run(
            worktree=tree.path,
            task_file=self.folder.task_file(task.id, tree.path),
            result_file=result_file,
            attempt_dir=self.attempts_dir / f"{task.id}-{attempt.number}",
            deadline_seconds=task.deadline_seconds,
            extra_env={
                **tree.env(),
                "TENURE_TASK_ID": task.id,
                "TENURE_ATTEMPT": str(attempt.number),
                "TENURE_RUN": self.run_id,
            },
            commit_message=f"tenure: {task.id} attempt {attempt.number} ({self.config.agent.name})",
            cancel=self.cancels.get(task.id),
        )
        report = result_file.read_text() if result_file.exists() else ""
        lines = [f"- agent: exit {run.exit_code}, {run.seconds:.1f}s, log {run.log}"]
        if run.reason:
            lines.append(f"- rejected: {run.reason}")
            tail = run.log.read_text(errors="replace")[-2000:] if run.log.exists() else ""
            return _Return(attempt, False, f"{run.reason}\n{tail}", report, "\n".join(lines))
        on = git.current_branch(tree.path)
        if on != tree.branch:  # what is checked and what is merged must be the same commit
            reason = f"the agent left its branch {tree.branch} (the worktree is on {on})"
            lines.append(f"- rejected: {reason}")
            return _Return(attempt, False, reason, report, "\n".join(lines))
        changed = git.changed_files(tree.path, tree.base, tree.branch)
        outside = [p for p in changed if not in_scope(p, task.scope)]
        if outside:
            reason = (
                f"change touches files outside the task's scope ({', '.join(task.scope)}): "
                + ", ".join(outside)
            )
            lines.append(f"- rejected: {reason}")
            return _Return(attempt, False, reason, report, "\n".join(lines))
        if not changed:
            lines.append("- note: the agent changed nothing")
        failures = []
        for check in task.checks:
            if not isinstance(check, CommandCheck):
                continue
            verdict = check_command(check, tree.path)
            mark = "passed" if verdict.passed else "FAILED"
            lines.append(f"- `{check.run}`: {mark}")
            if not verdict.passed:
                failures.append(verdict.reason)
        if failures:
            return _Return(attempt, False, "\n".join(failures), report, "\n".join(lines))
        return _Return(attempt, True, "", report, "\n".join(lines))

    def _returned(self, attempt: _Attempt, future: Future[_Return]) -> None:
        task = attempt.task
        row = self.rows[task.id]
        try:
            back = future.result()
        except Exception as exc:  # a worker-side crash is a failed attempt, never a lost run
            back = _Return(attempt, False, f"{type(exc).__name__}: {exc}", "", f"- error: {exc}")
        self.folder.append_result(task.id, attempt.number, back.report, back.verdicts)
        row.updated_at = now()
        cancel = self.cancels.pop(task.id, None)
        if cancel is not None and cancel.is_set():
            why = f"cancelled by a replan: {self.cancel_reason}"
            self.folder.append_attempt(task.id, attempt.number, f"{why}\n{back.reason}")
            row.state, row.reason = CANCELLED, why
            row.history.append(f"attempt {row.attempt}: {why}"[:250])
            self.folder.write_status(self.rows)
            self._commit(f"tenure: {task.id} attempt {attempt.number} cancelled")
            return
        if back.accepted:
            row.state, row.reason = ACCEPTED, ""
        else:
            self.folder.append_attempt(task.id, attempt.number, back.reason)
            self._after_failure(task, row, back.reason)
        self.folder.write_status(self.rows)
        verb = "accepted" if back.accepted else "rejected"
        self._commit(f"tenure: {task.id} attempt {attempt.number} {verb}")

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

    # --- goal shift ---------------------------------------------------------------------

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

    # --- integration --------------------------------------------------------------------

    def _merge_in_order(self) -> None:
        for task_id in self.order:
            row = self.rows[task_id]
            if row.state in FINISHED:
                continue
            if row.state != ACCEPTED:
                return  # plan order: a later task waits for the earlier one
            merged, report = git.merge(
                self.int_path, row.branch, f"tenure: merge {task_id} ({row.branch})"
            )
            task = self.plan.task(task_id)
            row.updated_at = now()
            if merged:
                row.state, row.merged_branch = MERGED, row.branch
                self.folder.write_status(self.rows)
                self._commit(f"tenure: {task_id} merged")
                continue
            text = (
                f"{report}\nRedo the task on top of the integration branch; "
                "do not pick a side blindly."
            )
            self.folder.append_attempt(task_id, row.attempt, text)
            self._after_failure(task, row, report)
            self.folder.write_status(self.rows)
            self._commit(f"tenure: {task_id} conflicts with the integration branch")

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
        return CodingOutcome(
            self.run_id, done, self.integration, self.int_path, states, reason, verdicts
        )


def overlapping_scopes(plan: Plan) -> list[str]:
    """Pairs of tasks that may run at the same time (neither depends on the other) and may
    change the same paths: each pair is a merge conflict waiting to happen."""
    after: dict[str, set[str]] = {}
    for task_id in merge_order(plan):
        task = plan.task(task_id)
        after[task_id] = set(task.depends_on).union(*(after[d] for d in task.depends_on))
    found = []
    tasks = plan.tasks
    for i, a in enumerate(tasks):
        for b in tasks[i + 1 :]:
            if a.id in after[b.id] or b.id in after[a.id]:
                continue
            shared = [
                f"{x} ~ {y}" if x != y else x
                for x in a.scope or ["."]
                for y in b.scope or ["."]
                if in_scope(posixpath.normpath(x), [y]) or in_scope(posixpath.normpath(y), [x])
            ]
            if shared:
                found.append(
                    f"{a.id} and {b.id} may both change {', '.join(shared)}; a conflict "
                    f"re-dispatches {b.id}: consider depends_on or disjoint scopes"
                )
    return found


def merge_order(plan: Plan) -> list[str]:
    """Plan order, except that a task never comes before a task it depends on."""
    placed: list[str] = []
    left = list(plan.tasks)
    while left:
        for task in left:
            if all(d in placed for d in task.depends_on):
                placed.append(task.id)
                left.remove(task)
                break
    return placed
