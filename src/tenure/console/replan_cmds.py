"""``tenure replan``: shift a team's goal to a new plan (the runtime applies it; this
module parses and prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, fail, out
from tenure.console.coding_cmds import RepoOption, replan_run
from tenure.console.keys_cmds import InsecureOption, KeysOption, keys_root, member_credentials
from tenure.console.safe import safe_text
from tenure.console.stores import existing, require_team
from tenure.coord import Credentials
from tenure.protocol.codec import load_plan
from tenure.roles.teams.replan import UNCHANGED, Replanned
from tenure.roles.teams.replan import replan as replan_team
from tenure.store import Store

CODE_PREFIX = "code/"


@app.command("replan")
def replan(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="The new plan.")],
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            "-t",
            help="The team to replan (default: the new plan's).",
            callback=params.team,
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run", help="A coding run to replan (with --workdir).", callback=params.ident),
    ] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why; goes into the changelog.")] = "",
    cancel_running: Annotated[
        bool,
        typer.Option(
            "--cancel-running/--let-running-finish",
            help="Cancel running attempts (with the reason) or let them finish: a task the "
            "new plan drops is then never accepted, a changed one runs again.",
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", help="Seconds to wait for a running leader.", callback=params.seconds()
        ),
    ] = 60.0,
    repo: RepoOption = Path("."),
    store: StoreOption = None,
    keys: KeysOption = None,
    insecure: InsecureOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="The revision as JSON.")] = False,
) -> None:
    """Shift a team's goal: the new plan is checked whole, then applied once while nothing
    is dispatched — by the team's live leader, or directly under the team's lease when
    none runs. Unstarted tasks are re-derived, dropped ones cancelled with the reason,
    running ones finish or are cancelled; a `plan.update` event and a changelog entry
    (`tenure status`, `tenure log`) say what changed, why, who and when.

    Example: `tenure replan new.yaml --team pricing --reason "drop the export" --cancel-running`

    Example: `tenure replan new.yaml --run run-20260101-120000 --workdir ~/src/app --reason "t3 instead"`
    """
    if team is not None and team.startswith(CODE_PREFIX) and run_id is None:
        run_id = team[len(CODE_PREFIX) :]
    if run_id is not None:
        replan_run(plan_path, run_id, reason, repo, cancel_running, timeout, store)
        return
    plan = load_plan(plan_path)
    if team is not None and team != plan.team:
        raise fail(f"--team {team}: the new plan {plan_path} is for team {plan.team!r}")
    with existing(store) as opened:  # a replan acts on a team that exists: nothing is made
        require_team(opened, plan.team)
        credentials = _credentials(opened, keys, insecure, plan.team)
        done = replan_team(
            opened,
            plan,
            reason=reason,
            cancel_running=cancel_running,
            credentials=credentials,
            timeout=timeout,
        )
    _print(done, as_json)
    if done.revision.refused is not None:
        raise fail(f"replan refused: {done.revision.refused}")


def _credentials(store: Store, keys: Path | None, insecure: bool, team: str) -> Credentials | None:
    """The team's lead key signs the request; a team that has none (a local run) takes an
    unsigned one, and a signed leader refuses that (as the runtime does without a leader)."""
    if not insecure and not (keys_root(keys) / team / "_lead.key").exists():
        return None
    return member_credentials(store, keys, insecure, team, "operator", "lead")


def _print(done: Replanned, as_json: bool) -> None:
    revision = done.revision
    if as_json:
        data = {**revision.model_dump(mode="json"), "applied_by": done.applied_by}
        jsonout.emit("replan", **data)
        return
    if revision.refused is not None:
        return
    if done.applied_by == UNCHANGED:
        out.print(
            f"the team runs this plan already (revision {revision.revision}); nothing to change",
            soft_wrap=True,
        )
        return
    for note in revision.notes:
        out.print(f"  {safe_text(note)}", soft_wrap=True)
    out.print(
        f"replanned to revision {revision.revision} ({safe_text(done.applied_by)}): "
        f"{len(revision.added)} added, {len(revision.dropped)} dropped, "
        f"{len(revision.changed)} changed",
        soft_wrap=True,
    )
