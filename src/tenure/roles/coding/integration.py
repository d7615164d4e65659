"""The coding team's leader hook: task files at dispatch, the leader's own checks on the
attempt's branch, merging in plan order, and the run folder kept as a projection.

The standard conductor runs a coding team like any other (lease, fencing,
dispatch, retries, ladder, budgets, split, inbox); this hook adds what a coding
run is:

- ``on_dispatch``: the task file is written and the dispatch committed before
  the attempt goes out; the envelope names the commit it starts from;
- ``before_review``: nothing the agent may not change was changed (``containment``,
  see ``executors/containment.py``), the agent stayed on its branch, the commit at
  the branch's tip changed only files in the task's scope and adds no symbolic
  link leading out of the repository (verdicts of their own); command checks run
  on a fresh checkout of exactly that commit, removed afterwards;
- ``on_accept``: nothing was changed during the checks either; the accepted commit
  waits (``review``) to be merged, as it is, in plan order;
- ``on_tick``: the files follow the register (``projection``), accepted branches
  are merged in plan order (a conflict is a new attempt on top of the
  integration branch), a replan request is applied once nothing runs;
- ``on_takeover``: an attempt its dead leader process left running is
  interrupted: its agent killed, what it left committed, a new attempt;
- ``on_exhausted``: a task out of attempts goes to the operator;
- ``on_settled``: the final checks of every task, together, on a fresh checkout of
  the integration branch's tip.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from tenure.executors import git
from tenure.executors.agent_cli import kill_orphan
from tenure.protocol import CommandCheck, TaskResult, idempotency_key
from tenure.protocol.clip import clip, first_line
from tenure.protocol.envelope import PriorAttempt
from tenure.protocol.errors import Conflict, TenureError
from tenure.protocol.taskspec import AttemptData
from tenure.protocol.words import counted
from tenure.roles.coding.config import CodingOutcome
from tenure.roles.coding.files import ACCEPTED, FINISHED, MERGED, RUNNING
from tenure.roles.coding.projection import noted, project, write_report
from tenure.roles.coding.replan import REQUEST_FILE, ReplanRequest, apply_replan, held_back
from tenure.roles.coding.rows import CodingNotes, branch_for, iso, rows_of
from tenure.roles.coding.run import RunPlace
from tenure.roles.coding.scope import in_scope
from tenure.roles.leader import GO, HOLD, Admission, Dispatch, LeaderContext, LeaderHook, Review
from tenure.roles.register import Task
from tenure.verify import Verdict, check_command, verdict_event
from tenure.verify.decisions import VERDICT_EVENT

__all__ = ["IntegrationHook"]

FULL_LOOK_SECONDS = 1.0  # on_tick: git metadata every round, the checkouts at most this often


class IntegrationHook(LeaderHook):
    name: ClassVar[str] = "coding"

    def __init__(self, place: RunPlace) -> None:
        self.place = place
        self.frozen = False  # a replan request is pending: nothing new is dispatched
        self.cancelled_for: ReplanRequest | None = None
        self.outcome: CodingOutcome | None = None
        self.started: dict[str, float] = {}  # attempt key -> when this leader sent it
        self.checking: dict[str, str] = {}  # attempt key -> the commit its checks ran on
        self.looked = 0.0  # the last full look of the guard in on_tick

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
        if place.guard is not None:
            self.started[idempotency_key(task.task_id, attempt)] = place.guard.clock()
        dispatch.data = noted(data, base=base)
        place.event(
            "dispatched", task_id=task.task_id, attempt=attempt, worker=dispatch.worker, branch=branch
        )

    # --- review -----------------------------------------------------------------------

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> Review | None:
        if task.data.coding_state == ACCEPTED:
            return Review(decided=True)  # accepted by an earlier leader: it waits to merge
        place = self.place
        root = place.root
        tree = place.trees.path_for(task.task_id, task.attempt)
        branch = branch_for(place.run_id, task.task_id, task.attempt)
        contained = self._contained(task)
        if not contained.passed:
            return Review(verdicts=[contained])
        if not tree.is_dir():
            missing = Verdict("branch", False, f"the attempt's worktree {tree} is gone")
            return Review(verdicts=[missing])
        if not git.branch_exists(root, branch):
            return Review(verdicts=[Verdict("branch", False, f"the attempt's branch {branch} is gone")])
        try:
            on = git.current_branch(tree, at=git.dirs_of(root, tree))
        except TenureError as exc:
            on = f"(unreadable: {first_line(str(exc))})"
        if on != branch:  # what is checked and what is merged must be the same commit
            left = Verdict("branch", False, f"the agent left its branch {branch} (the worktree is on {on})")
            return Review(verdicts=[left])
        commit = git.head(root, f"refs/heads/{branch}")
        base = CodingNotes.of(task.data).base or git.git(
            root, "merge-base", place.integration, commit
        ).strip()
        stayed = Verdict("branch", True, f"the change is {commit[:12]}, the tip of its branch {branch}")
        verdicts = [contained, stayed, _scope_verdict(task, root, base, commit)]
        verdicts.append(_links_verdict(root, base, commit))
        if not all(v.passed for v in verdicts):
            return Review(verdicts=verdicts)
        if place.guard is not None:
            place.guard.open()  # the checks run the agent's code: watched from here
        try:
            checkout = git.checkout_exact(
                root, commit, place.checkouts / f"{task.task_id}-{task.attempt}"
            )
        except (TenureError, OSError) as exc:
            if place.guard is not None:
                place.guard.close()
            broken = Verdict("checkout", False, f"cannot check out {commit[:12]}: {exc}")
            return Review(verdicts=[*verdicts, broken])
        key = idempotency_key(task.task_id, task.attempt)
        self.checking[key] = commit
        return Review(verdicts=verdicts, workdir=checkout, after=[lambda: self._after(checkout)])

    def _contained(self, task: Task) -> Verdict:
        """Nothing an agent may not change was changed while this attempt ran (its
        changes are undone already; every attempt running then is rejected)."""
        guard = self.place.guard
        if guard is None:
            return Verdict("containment", True, "not watched")
        guard.inspect()
        key = idempotency_key(task.task_id, task.attempt)
        found = guard.since(self.started.get(key, guard.started))
        if not found:
            return Verdict("containment", True, "nothing outside the attempt's worktree changed")
        shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
        return Verdict(
            "containment",
            False,
            "changed what an agent may not change while this attempt ran: "
            f"{shown} (undone by the leader; anything moved away is in {guard.quarantine})",
            {"changes": found[:50]},
        )

    def _after(self, checkout: Path) -> None:
        """The checks ran (the agent's code with them): the checkout goes, and the guard
        looks again; on_accept turns what it finds into a rejection."""
        git.drop_checkout(self.place.root, checkout)
        if self.place.guard is not None:
            self.place.guard.close()

    def on_accept(self, ctx: LeaderContext, task: Task, verdicts: list[Verdict]) -> bool:
        place = self.place
        key = idempotency_key(task.task_id, task.attempt)
        contained = self._contained(task)
        if not contained.passed:
            ctx.event(VERDICT_EVENT, verdict_event(contained, task_id=task.task_id, key=key))
            ctx.retry(task, "rejected", f"containment check failed: {contained.reason}")
            return True
        result = TaskResult.model_validate(task.result)
        checked = self.checking.pop(key, "")
        data = noted(task.data, reported=task.attempt, checked=checked).with_(coding_state=ACCEPTED)
        task = ctx.register.move(task, "review", data=data)
        write_report(place, task.task_id, task.attempt, result, [_line(v) for v in verdicts])
        place.commit(f"tenure: {task.task_id} attempt {task.attempt} accepted")
        place.event("accepted", task_id=task.task_id, attempt=task.attempt, now=ACCEPTED, reason="")
        return True

    def on_exhausted(self, ctx: LeaderContext, task: Task, failure: str, data: AttemptData) -> bool:
        reason = f"{counted(task.used_attempts, 'attempt')} failed; last: {first_line(failure)}"
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
        if place.guard is not None:
            place.guard.inspect()
        branch = branch_for(place.run_id, task.task_id, task.attempt)
        if tree.is_dir() and git.branch_exists(place.root, branch):
            message = f"tenure: salvage interrupted attempt {task.attempt}"
            git.commit_onto(place.root, tree, branch, message)
        ctx.retry(task, "interrupted", f"attempt {task.attempt} interrupted: the leader process stopped")
        return True

    # --- every round ------------------------------------------------------------------

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        guard = self.place.guard
        if guard is not None:  # undo at once what an agent changed; its review rejects it
            full = time.monotonic() - self.looked >= FULL_LOOK_SECONDS
            if full:
                self.looked = time.monotonic()
            guard.inspect(full=full)
        acted = project(self.place, tasks)
        if acted:
            tasks = ctx.tasks()
        acted |= self._merge_in_order(ctx, tasks, self._held())
        return self._replan(ctx) or acted

    def _held(self) -> set[str]:
        """The tasks a pending replan drops or changes: never merged under the old plan,
        even once a running attempt has finished and passed."""
        try:
            request = ReplanRequest.read(self.place.attempts)
        except (ValueError, KeyError, TypeError):
            return set()  # refused (and removed) by ``_replan``
        return set() if request is None else held_back(self.place.plan, request.plan)

    def _merge_in_order(
        self, ctx: LeaderContext, tasks: list[Task], held: frozenset[str] | set[str] = frozenset()
    ) -> bool:
        place = self.place
        by_id = {t.task_id: t for t in tasks}
        rows = rows_of(place.run_id, tasks)
        for task_id in place.order(tasks):
            row = rows.get(task_id)
            if row is None or row.state in FINISHED:
                continue
            if task_id in held:
                return False  # a pending replan drops or changes it: it settles it first
            if row.state != ACCEPTED:
                return False  # plan order: a later task waits for the earlier one
            self._merge(ctx, by_id[task_id])
            return True  # one merge a round; the next round sees the register after it
        return False

    def _merge(self, ctx: LeaderContext, task: Task) -> None:
        place = self.place
        branch = branch_for(place.run_id, task.task_id, task.attempt)
        if place.guard is not None:
            place.guard.inspect()
        # the commit the checks passed on, whatever the branch says now
        commit = CodingNotes.of(task.data).checked or branch
        epoch = place.fence()
        merged, report = git.merge(
            place.int_path,
            commit,
            f"tenure: merge {task.task_id} ({branch})\n\nTenure-Epoch: {epoch}",
            name=branch,
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
            tip = git.head(place.int_path)
            started = place.guard.clock() if place.guard is not None else 0.0
            if place.guard is not None:
                place.guard.open()
            checkout = git.checkout_exact(place.root, tip, place.checkouts / "integration")
            try:
                for task in (t for t in tasks if t.state == "done"):  # dropped ones do not count
                    for check in task.spec.checks:
                        if isinstance(check, CommandCheck):
                            verdicts.append(check_command(check, checkout))
            finally:
                git.drop_checkout(place.root, checkout)
            if place.guard is not None:
                place.guard.close()
                changed = place.guard.since(started)
                if changed:
                    verdicts.append(
                        Verdict(
                            "containment",
                            False,
                            "the final checks changed what they may not: " + "; ".join(changed[:6]),
                        )
                    )
            failed = [v for v in verdicts if not v.passed]
            done = not failed
            reason = (
                f"every task merged and all checks pass together on the integration branch "
                f"({tip[:12]}, checked on a fresh checkout)"
                if done
                else "integration checks failed: " + failed[0].reason
            )
            place.folder.append_changelog(("done: " if done else "not done: ") + clip(reason, 500))
            place.commit("tenure: run " + ("done" if done else "failed integration checks"), tasks)
        place.event("finished", done=done, reason=clip(reason, 500))
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


def _scope_verdict(task: Task, root: Path, base: str, commit: str) -> Verdict:
    changed = git.changed_files(root, base, commit)
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


def _links_verdict(root: Path, base: str, commit: str) -> Verdict:
    """No symbolic link the change adds or alters leads out of the repository (or into
    its ``.git``), followed through the commit's own links as a checkout would."""
    entries = git.tree_entries(root, commit)
    links = {p: e.oid for p, e in entries.items() if e.mode == git.LINK_MODE}
    changed = [p for p in git.changed_files(root, base, commit) if p in links]
    if not changed:
        return Verdict("links", True, "no symbolic link added or changed")
    contents = git.blobs(root, list(links.values()))
    targets = {p: contents[o].decode(errors="surrogateescape") for p, o in links.items()}
    leaving = [f"{p} -> {targets[p]}" for p in changed if _leaves(p, targets)]
    if leaving:
        return Verdict(
            "links",
            False,
            "the change adds symbolic links that lead out of the repository: " + ", ".join(leaving),
            {"links": leaving},
        )
    return Verdict("links", True, f"{len(changed)} symbolic link(s), all inside the repository")


def _leaves(link: str, targets: dict[str, str]) -> bool:
    """Whether ``link`` resolves outside the tree (absolute, above its top, through too
    many links) or into ``.git``, following the tree's links on the way."""
    resolved = link.split("/")[:-1]
    pending = targets[link].split("/")
    if targets[link].startswith("/"):
        return True
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return True
            resolved.pop()
            continue
        resolved.append(part)
        here = posixpath.join(*resolved)
        if resolved[0] == ".git":
            return True
        if here in targets:
            hops += 1
            target = targets[here]
            if hops > 40 or target.startswith("/"):
                return True
            resolved.pop()
            pending = target.split("/") + pending
    return False


def _line(verdict: Verdict) -> str:
    mark = "passed" if verdict.passed else "FAILED"
    if verdict.check == "command":
        command = verdict.evidence.get("command")
        return f"`{command or verdict.reason}`: {mark}"
    return f"{verdict.check}: {mark} ({clip(verdict.reason, 200)})"
