"""The coding team's leader hook: task files at dispatch, the leader's own checks on the
attempt's branch, merging in plan order, and the run folder kept as a projection.

The standard conductor runs a coding team like any other (lease, fencing,
dispatch, retries, ladder, budgets, split, inbox); this hook adds what a coding
run is:

- ``on_dispatch``: the task file is written and the dispatch committed before
  the attempt goes out; the envelope names the commit it starts from;
- ``before_review``: the agent stayed on its branch and changed only files in the
  task's scope (verdicts of their own); command checks run in the attempt's
  worktree;
- ``on_accept``: an accepted attempt waits (``review``) to be merged in plan order;
- ``on_tick``: the files follow the register (``projection``), accepted branches
  are merged in plan order (a conflict is a new attempt on top of the
  integration branch), a replan request is applied once nothing runs;
- ``on_takeover``: an attempt its dead leader process left running is
  interrupted: its agent killed, what it left committed, a new attempt;
- ``on_exhausted``: a task out of attempts goes to the operator;
- ``on_settled``: the final checks of every task, together on the integration
  branch.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from tenure.executors import git
from tenure.executors.agent_cli import kill_orphan
from tenure.protocol import CommandCheck, TaskResult
from tenure.protocol.envelope import PriorAttempt
from tenure.protocol.errors import Conflict, TenureError
from tenure.protocol.taskspec import AttemptData
from tenure.roles.coding.config import CodingOutcome
from tenure.roles.coding.files import ACCEPTED, FINISHED, MERGED, RUNNING
from tenure.roles.coding.projection import noted, project, write_report
from tenure.roles.coding.replan import REQUEST_FILE, ReplanRequest, apply_replan
from tenure.roles.coding.rows import CodingNotes, branch_for, first_line, iso, rows_of
from tenure.roles.coding.run import RunPlace
from tenure.roles.coding.scope import in_scope
from tenure.roles.leader import GO, HOLD, Admission, Dispatch, LeaderContext, LeaderHook, Review
from tenure.roles.register import Task
from tenure.verify import Verdict, check_command

__all__ = ["IntegrationHook"]


class IntegrationHook(LeaderHook):
    name: ClassVar[str] = "coding"

    def __init__(self, place: RunPlace) -> None:
        self.place = place
        self.frozen = False  # a replan request is pending: nothing new is dispatched
        self.cancelled_for: ReplanRequest | None = None
        self.outcome: CodingOutcome | None = None

    # --- dispatch ---------------------------------------------------------------------

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        return HOLD if self.frozen else GO

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        place, task = self.place, dispatch.task
        folder = place.folder
        dispatch.input.update(
            run=place.run_id, task_file=str(folder.task_file(task.task_id).relative_to(place.int_path))
        )
        if not dispatch.new:
            dispatch.input["base"] = CodingNotes.of(task.data).base
            return
        attempt = task.attempt + 1
        folder.write_task(task.spec.plan_task(), place.plan)
        branch = branch_for(place.run_id, task.task_id, attempt)
        notes = CodingNotes.of(task.data).model_copy(
            update={"worker": dispatch.worker, "started_at": iso(ctx.now()), "dispatched": attempt}
        )
        data = notes.into(dispatch.data).with_(coding_state=RUNNING, branch=branch)
        shown = [t for t in ctx.tasks() if t.task_id != task.task_id]
        upcoming = Task(task.record, task.spec, data)
        place.commit(
            f"tenure: dispatch {task.task_id} attempt {attempt} to {dispatch.worker}",
            [*shown, _as_running(upcoming, dispatch.worker, attempt)],
        )
        base = git.head(place.int_path)
        dispatch.input["base"] = base
        dispatch.data = noted(data, base=base)
        place.event(
            "dispatched", task_id=task.task_id, attempt=attempt, worker=dispatch.worker, branch=branch
        )

    # --- review -----------------------------------------------------------------------

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> Review | None:
        if task.data.coding_state == ACCEPTED:
            return Review(decided=True)  # accepted by an earlier leader: it waits to merge
        place = self.place
        tree = place.trees.path_for(task.task_id, task.attempt)
        branch = branch_for(place.run_id, task.task_id, task.attempt)
        if not tree.is_dir():
            missing = Verdict("branch", False, f"the attempt's worktree {tree} is gone")
            return Review(verdicts=[missing])
        on = git.current_branch(tree)
        if on != branch:  # what is checked and what is merged must be the same commit
            left = Verdict("branch", False, f"the agent left its branch {branch} (the worktree is on {on})")
            return Review(verdicts=[left])
        base = CodingNotes.of(task.data).base or git.git(
            place.root, "merge-base", place.integration, branch
        ).strip()
        stayed = Verdict("branch", True, f"the change is on its branch {branch}")
        return Review(verdicts=[stayed, _scope_verdict(task, tree, base, branch)], workdir=tree)

    def on_accept(self, ctx: LeaderContext, task: Task, verdicts: list[Verdict]) -> bool:
        place = self.place
        result = TaskResult.model_validate(task.result)
        data = noted(task.data, reported=task.attempt).with_(coding_state=ACCEPTED)
        task = ctx.register.move(task, "review", data=data)
        write_report(place, task.task_id, task.attempt, result, [_line(v) for v in verdicts])
        place.commit(f"tenure: {task.task_id} attempt {task.attempt} accepted")
        place.event("accepted", task_id=task.task_id, attempt=task.attempt, now=ACCEPTED, reason="")
        return True

    def on_exhausted(self, ctx: LeaderContext, task: Task, failure: str, data: AttemptData) -> bool:
        reason = f"{task.used_attempts} attempts failed; last: {first_line(failure)}"
        ctx.block(task, reason, question=reason, data=data)
        return True

    # --- a new leader ------------------------------------------------------------------

    def on_takeover(self, ctx: LeaderContext, task: Task) -> bool:
        """An attempt in flight when the leader's process stopped: its agent is killed
        (it runs in a session of its own), what it left is committed, and it counts as
        a failed attempt; the next one starts fresh."""
        if task.spec.replica_of:
            return False
        place = self.place
        kill_orphan(place.attempts / f"{task.task_id}-{task.attempt}")
        tree = place.trees.path_for(task.task_id, task.attempt)
        if tree.is_dir():
            git.commit_all(tree, f"tenure: salvage interrupted attempt {task.attempt}")
        ctx.retry(task, "interrupted", f"attempt {task.attempt} interrupted: the leader process stopped")
        return True

    # --- every round ------------------------------------------------------------------

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        acted = project(self.place, tasks)
        if acted:
            tasks = ctx.tasks()
        acted |= self._merge_in_order(ctx, tasks)
        return self._replan(ctx) or acted

    def _merge_in_order(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        place = self.place
        by_id = {t.task_id: t for t in tasks}
        rows = rows_of(place.run_id, tasks)
        for task_id in place.order(tasks):
            row = rows.get(task_id)
            if row is None or row.state in FINISHED:
                continue
            if row.state != ACCEPTED:
                return False  # plan order: a later task waits for the earlier one
            self._merge(ctx, by_id[task_id])
            return True  # one merge a round; the next round sees the register after it
        return False

    def _merge(self, ctx: LeaderContext, task: Task) -> None:
        place = self.place
        branch = branch_for(place.run_id, task.task_id, task.attempt)
        epoch = place.fence()
        merged, report = git.merge(
            place.int_path, branch, f"tenure: merge {task.task_id} ({branch})\n\nTenure-Epoch: {epoch}"
        )
        if not merged:
            text = f"{report}\nRedo the task on top of the integration branch; do not pick a side blindly."
            ctx.retry(task, "conflict", text)
            return
        place.tip = git.head(place.int_path)  # this leader's own merge commit
        data = noted(task.data, merged_branch=branch).with_(coding_state=MERGED)
        ctx.register.move(task, "done", data=data, reason="merged")
        place.commit(f"tenure: {task.task_id} merged")
        place.event("merged", task_id=task.task_id, branch=branch, attempt=task.attempt)

    def _replan(self, ctx: LeaderContext) -> bool:
        """A pending request freezes dispatch; running attempts finish or are cancelled;
        once nothing runs, it is applied (or refused) and removed."""
        place = self.place
        path = place.attempts / REQUEST_FILE
        try:
            request = ReplanRequest.read(place.attempts)
        except (ValueError, KeyError, TypeError) as exc:
            place.folder.append_changelog(f"replan refused (unreadable request): {exc}")
            place.commit("tenure: replan refused")
            path.unlink(missing_ok=True)
            return True
        self.frozen = request is not None
        if request is None:
            return False
        tasks = ctx.tasks()
        if request.cancel_running and self.cancelled_for != request:
            self.cancelled_for = request
            for task in tasks:
                if task.state == "running" or (task.state == "queued" and task.assignee):
                    _cancel_attempt(ctx, task, f"cancelled by a replan: {request.reason}")
            return True
        if any(t.state == "running" or (t.state == "queued" and t.assignee) for t in tasks):
            return False  # running attempts finish first
        try:
            apply_replan(place, request)
        except TenureError as exc:  # a bad replan never ends the run
            if not isinstance(exc, Conflict):
                place.folder.append_changelog(f"replan refused: {exc}")
                place.commit("tenure: replan refused")
        path.unlink(missing_ok=True)
        self.frozen, self.cancelled_for = False, None
        return True

    # --- the end ----------------------------------------------------------------------

    def on_settled(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        if self.frozen:
            return True  # the replan is applied on the next round
        if self.outcome is None:
            self.outcome = self._finish(tasks)
        return False

    def _finish(self, tasks: list[Task]) -> CodingOutcome:
        place = self.place
        rows = rows_of(place.run_id, tasks)
        states = {k: r.state for k, r in rows.items()}
        waiting = [t.id for t in place.plan.tasks if states.get(t.id) not in (MERGED, "split")]
        verdicts: list[Verdict] = []
        if waiting:
            done, reason = False, f"not merged: {', '.join(waiting)} (see status.yml and inbox.md)"
            place.commit("tenure: status", tasks)
        else:
            for task in (t for t in tasks if t.state == "done"):  # dropped ones do not count
                for check in task.spec.checks:
                    if isinstance(check, CommandCheck):
                        verdicts.append(check_command(check, place.int_path))
            failed = [v for v in verdicts if not v.passed]
            done = not failed
            reason = (
                "every task merged and all checks pass together on the integration branch"
                if done
                else "integration checks failed: " + failed[0].reason
            )
            place.folder.append_changelog(("done: " if done else "not done: ") + reason[:500])
            place.commit("tenure: run " + ("done" if done else "failed integration checks"), tasks)
        place.event("finished", done=done, reason=reason[:500])
        return CodingOutcome(
            place.run_id, done, place.integration, place.int_path, states, reason, verdicts
        )


def _as_running(task: Task, worker: str, attempt: int) -> Task:
    """The task as it will be once the dispatch is written: status.yml shows it so."""
    record = replace(task.record, state="running", assignee=worker, attempt=attempt)
    return Task(record, task.spec, task.data)


def _cancel_attempt(ctx: LeaderContext, task: Task, why: str) -> None:
    """Stop a running attempt without spending an attempt: back to queued (its worker
    sees the attempt is no longer its own and stops the agent), counted as cancelled."""
    prior = PriorAttempt(attempt=max(task.attempt, 1), status="cancelled", failure=why)
    data = task.data.with_(
        history=[*task.data.history, prior],
        dispatched_at=None,
        coding_state="cancelled",
        attempt_base=task.attempt,
    )
    try:
        ctx.register.move(task, "queued", assignee=None, data=data, reason=why)
    except Conflict:
        return


def _scope_verdict(task: Task, tree: Path, base: str, branch: str) -> Verdict:
    changed = git.changed_files(tree, base, branch)
    scope = list(task.spec.scope)
    outside = [p for p in changed if not in_scope(p, scope)]
    if outside:
        return Verdict(
            "scope",
            False,
            f"change touches files outside the task's scope ({', '.join(scope)}): "
            + ", ".join(outside),
        )
    if not changed:
        return Verdict("scope", True, "the agent changed nothing")
    return Verdict("scope", True, f"{len(changed)} file(s) changed, all in scope")


def _line(verdict: Verdict) -> str:
    mark = "passed" if verdict.passed else "FAILED"
    if verdict.check == "command":
        command = verdict.evidence.get("command")
        return f"`{command or verdict.reason}`: {mark}"
    return f"{verdict.check}: {mark} ({verdict.reason[:200]})"
