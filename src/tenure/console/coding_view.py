"""What ``tenure code`` shows while its run goes (a line per step of each task, read
from the run's event log) and how it ends (per-task states, the integration branch,
or its ``--json`` document); a signal stops it with a line saying so."""

from __future__ import annotations

from functools import partial

import typer

from tenure.console import jsonout
from tenure.console.app import err, fail, out
from tenure.console.exits import Exit
from tenure.console.processes import Terminated, terminated_on_signals
from tenure.console.progress import CodingNarrator, every_seconds, following
from tenure.console.safe import safe_text
from tenure.roles.coding import CodingLeader, team_for
from tenure.roles.coding.config import CodingOutcome
from tenure.roles.coding.files import NEEDS_OPERATOR


def run_with_progress(leader: CodingLeader, workers: int) -> CodingOutcome:
    """``leader.run()``, saying each task's steps as they happen; Ctrl-C (exit 130) or
    SIGTERM (143) stop it with a line before and after."""
    narrator = CodingNarrator(_say, every_seconds())
    team = team_for(leader.run_id)
    try:
        with (
            terminated_on_signals(partial(_stopping, workers)),
            following(leader.store_url, team, narrator, narrator.tick),
        ):
            return leader.run()
    except KeyboardInterrupt:
        err.print(f"tenure code: stopped (Ctrl-C); run it again with --run {leader.run_id}")
        raise typer.Exit(Exit.INTERRUPTED) from None
    except Terminated as exc:
        err.print(f"tenure code: {exc}; run it again with --run {leader.run_id}")
        raise typer.Exit(128 + exc.signum) from None


def report(leader: CodingLeader, outcome: CodingOutcome, *, as_json: bool) -> None:
    """The per-task states and where the work is; not done: one line, exit 3 or 1."""
    files = f"{outcome.integration_worktree}/.tenure/runs/{outcome.run}/"
    if as_json:
        jsonout.emit(
            "code",
            run=outcome.run,
            team=team_for(outcome.run),
            done=outcome.done,
            reason=outcome.reason,
            states=outcome.states,
            integration_branch=outcome.integration_branch,
            files=files,
            final_checks=[
                {"check": v.check, "passed": v.passed, "reason": v.reason}
                for v in outcome.final_checks
            ],
            outcome=outcome.result.outcome,
            counts={
                name: getattr(outcome.result, name)
                for name in ("done", "blocked", "failed", "cancelled", "open")
            },
            tasks={
                task_id: {
                    "state": task.state,
                    "attempts": task.attempts,
                    "reason": task.reason,
                    "question": task.question,
                }
                for task_id, task in outcome.result.tasks.items()
            },
        )
    else:
        for task_id, state in outcome.states.items():
            out.print(f"  {safe_text(f'{task_id:<24}')} {safe_text(state)}", soft_wrap=True)
        out.print(f"integration branch: {safe_text(outcome.integration_branch)}", soft_wrap=True)
        out.print(f"files: {safe_text(files)}", soft_wrap=True)
    if not outcome.done:
        waiting = NEEDS_OPERATOR in outcome.states.values() and not outcome.reason.startswith(
            "stopped"
        )
        code = Exit.WAITING if waiting else Exit.ERROR
        raise fail(f"run {outcome.run} not done: {outcome.reason}", code)
    if not as_json:
        out.print(f"[green]done[/]: {safe_text(outcome.reason)}", soft_wrap=True)
        merge = f"git -C {leader.root} merge {outcome.integration_branch}"
        out.print(f"merge it: {safe_text(merge)}", soft_wrap=True)


def _say(line: str) -> None:
    out.print(safe_text(line), soft_wrap=True)


def _stopping(workers: int, why: str) -> None:
    err.print(f"{why}: stopping {workers} worker(s)…")
