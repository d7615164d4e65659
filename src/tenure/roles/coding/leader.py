"""The coding leader: dispatch each task attempt into its own worktree, accept it only on
checks the leader runs itself in that worktree, enforce scope, merge in plan order.

Every step is committed to the run's integration branch ``tenure/<run>/integration``
(dispatch → task file + status row; return → results file + status row; merge), so
``status.yml`` in git is the state and a killed run resumes from it. The leader holds
the run's lease in a Tenure store (``register``) and checks it before every step: one
that lost it stops and exits without writing.

The leader is built up in layers, one module each: ``core`` (state and row changes),
``integration`` (merging in plan order, the final checks), ``resume`` (opening and
resuming a run, replans), ``attempt`` (one attempt and its acceptance), with ``scope``
and ``config`` for the plan checks and the run's input and outcome; this module is the
run loop, and re-exports the public names.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from tenure.protocol import PlanTask
from tenure.protocol.errors import LeaseLost, StaleEpoch, TenureError
from tenure.roles.coding.attempt import Attempt, AttemptReturn, run_attempt
from tenure.roles.coding.config import CodingConfig, CodingOutcome, new_run_id, preflight
from tenure.roles.coding.files import ACCEPTED, CANCELLED, FINISHED, RUNNING, now
from tenure.roles.coding.replan import PID_FILE, REQUEST_FILE, ReplanRequest
from tenure.roles.coding.resume import LeaderResume
from tenure.roles.coding.scope import (
    check_scope,
    check_tasks,
    in_scope,
    merge_order,
    overlapping_scopes,
)

__all__ = [
    "CodingConfig",
    "CodingLeader",
    "CodingOutcome",
    "check_scope",
    "check_tasks",
    "in_scope",
    "merge_order",
    "new_run_id",
    "overlapping_scopes",
    "preflight",
]


class CodingLeader(LeaderResume):
    # --- the loop ----------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> CodingOutcome:
        stop = stop or threading.Event()
        self.claim()
        pid_file = self.attempts_dir / PID_FILE
        try:
            self._open()
            self._take_answers()
            self._take_cancels()
            pid_file.parent.mkdir(parents=True, exist_ok=True)
            pid_file.write_text(f"{os.getpid()}\n")
            return self._loop(stop)
        except (LeaseLost, StaleEpoch) as exc:
            return self._lost(exc)
        finally:
            pid_file.unlink(missing_ok=True)
            self.register.release()

    def _lost(self, exc: TenureError) -> CodingOutcome:
        """The lease is gone: write nothing more (the new leader owns the run) and say so."""
        self.register.lost(str(exc))
        states = {k: r.state for k, r in self.rows.items()}
        reason = f"stopped: this leader lost the lead of {self.register.team} ({exc})"
        return CodingOutcome(self.run_id, False, self.integration, self.int_path, states, reason)

    def _loop(self, stop: threading.Event) -> CodingOutcome:
        running: dict[Future[AttemptReturn], Attempt] = {}
        with ThreadPoolExecutor(max_workers=self.config.workers) as pool:
            try:
                self._steps(stop, pool, running)
            except (LeaseLost, StaleEpoch):
                for attempt in running.values():  # their work stays on their branches
                    self.cancels[attempt.task.id].set()
                raise
            if stop.is_set():
                # end the agents now; their rows stay "running", so a resume salvages
                # what they left and counts them as interrupted
                for attempt in running.values():
                    self.cancels[attempt.task.id].set()
        return self._finish(stopped=stop.is_set())

    def _steps(
        self,
        stop: threading.Event,
        pool: ThreadPoolExecutor,
        running: dict[Future[AttemptReturn], Attempt],
    ) -> None:
        """Dispatch, take returns and answers, merge, apply replans, until nothing is left."""
        while not stop.is_set():
            self.register.fence()
            self._take_answers()
            self._take_cancels()
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
                    except (LeaseLost, StaleEpoch):
                        raise
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

    def _dispatch(self, task: PlanTask) -> Attempt:
        self._fence()
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
        self._event(
            "dispatched", task_id=task.id, attempt=row.attempt, worker=row.worker, branch=row.branch
        )
        return Attempt(task, row.attempt, tree, slot)

    def _work(self, attempt: Attempt) -> AttemptReturn:
        """One attempt, on a worker thread (see :func:`run_attempt`)."""
        return run_attempt(
            attempt,
            self.config.agent,
            self.folder,
            self.attempts_dir,
            self.run_id,
            self.cancels.get(attempt.task.id),
        )

    def _returned(self, attempt: Attempt, future: Future[AttemptReturn]) -> None:
        self._fence()
        task = attempt.task
        row = self.rows[task.id]
        try:
            back = future.result()
        except Exception as exc:  # a worker-side crash is a failed attempt, never a lost run
            back = AttemptReturn(
                attempt, False, f"{type(exc).__name__}: {exc}", "", f"- error: {exc}"
            )
        self.folder.append_result(task.id, attempt.number, back.report, back.verdicts)
        row.updated_at = now()
        cancel = self.cancels.pop(task.id, None)
        if cancel is not None and cancel.is_set():
            why = self.cancel_why.pop(task.id, "") or f"cancelled by a replan: {self.cancel_reason}"
            self.folder.append_attempt(task.id, attempt.number, f"{why}\n{back.reason}")
            row.state, row.reason = CANCELLED, why
            row.history.append(f"attempt {row.attempt}: {why}"[:250])
            self.folder.write_status(self.rows)
            self._commit(f"tenure: {task.id} attempt {attempt.number} cancelled")
            self._event("cancelled", task_id=task.id, attempt=attempt.number, reason=why)
            return
        if back.accepted:
            row.state, row.reason = ACCEPTED, ""
        else:
            self.folder.append_attempt(task.id, attempt.number, back.reason)
            self._after_failure(task, row, back.reason)
        self.folder.write_status(self.rows)
        verb = "accepted" if back.accepted else "rejected"
        self._commit(f"tenure: {task.id} attempt {attempt.number} {verb}")
        first = back.reason.strip().splitlines()[0][:300] if back.reason.strip() else ""
        self._event(verb, task_id=task.id, attempt=attempt.number, now=row.state, reason=first)
