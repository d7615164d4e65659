"""``tenure code`` (a coding-agent team on a git repository), ``tenure gc``, ``tenure
discard`` and ``tenure replan``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from tenure.console.app import PassEnvOption, app, fail, out, pass_env
from tenure.console.model_cmds import AllowOption
from tenure.console.safe import safe_text
from tenure.executors import git
from tenure.executors.agent_cli import AGENT_HELP, AgentCLI
from tenure.executors.sandbox import SandboxMode
from tenure.executors.worktrees import TENURE_DIR, discard, plan_cleanup, remove
from tenure.protocol.codec import load_plan
from tenure.protocol.secrets import redact_url
from tenure.roles.coding import CodingConfig, CodingLeader, RunLeased, team_for
from tenure.roles.coding.discard import plan_discard
from tenure.roles.coding.lease import DEFAULT_LEASE_TTL
from tenure.roles.coding.replan import ReplanRequest, live_leader
from tenure.roles.coding.scope import check_tasks, overlapping_scopes

RepoOption = Annotated[
    Path, typer.Option("--repo", help="The target git repository (clean working tree).")
]

CodeStoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        envvar="TENURE_STORE",
        help="The run's state database: sqlite:///PATH (default REPO/.tenure/state.db) "
        "or redis://HOST:PORT/DB. The run is the team code/RUN there.",
        show_default=False,
    ),
]


@app.command("code")
def code(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="plan.yaml / plan.md")],
    repo: RepoOption = Path("."),
    agent: Annotated[str, typer.Option("--agent", help=AGENT_HELP)] = "claude",
    workers: Annotated[int, typer.Option("--workers", "-w", help="Parallel attempts.")] = 2,
    run_id: Annotated[
        str | None, typer.Option("--run", help="Run id; an existing one is resumed.")
    ] = None,
    split_with: Annotated[
        str | None,
        typer.Option(
            "--split-with",
            help="A model (like --model) that splits a task out of attempts, once, "
            "before the inbox.",
        ),
    ] = None,
    share_home: Annotated[
        bool,
        typer.Option(
            "--share-home", help="Let the agent use your HOME/config (its login) per attempt."
        ),
    ] = False,
    store: CodeStoreOption = None,
    lease_ttl: Annotated[
        float,
        typer.Option("--lease-ttl", help="Seconds the leader's lease lasts without renewal."),
    ] = DEFAULT_LEASE_TTL,
    allow_model: AllowOption = None,
    pass_names: PassEnvOption = None,
    no_sandbox: Annotated[
        bool,
        typer.Option(
            "--no-sandbox",
            help="Run the agent as a plain process, not in bubblewrap (it can then write "
            "anywhere you can; the leader only detects changes to .git and your checkout).",
        ),
    ] = False,
    require_sandbox: Annotated[
        bool,
        typer.Option(
            "--require-sandbox", help="Refuse to run unless bubblewrap (bwrap) works here."
        ),
    ] = False,
) -> None:
    """Run a plan with coding agents: one git worktree per attempt (agents sandboxed in
    bubblewrap where it works), checks run by the leader on a fresh checkout of the
    attempt's commit, accepted commits merged into tenure/RUN/integration in plan
    order. Files: .tenure/runs/RUN/ on that branch; state: the team code/RUN in the store
    (`tenure status --team code/RUN`, `tenure inbox`, `tenure answer --team code/RUN`).

    Example: `tenure code plan.yaml --repo ~/src/app --agent claude --workers 3 --share-home`
    """
    pass_env(pass_names)
    plan = load_plan(plan_path)
    if no_sandbox and require_sandbox:
        raise fail("--no-sandbox and --require-sandbox contradict each other; pick one")
    mode: SandboxMode = "off" if no_sandbox else "bwrap" if require_sandbox else "auto"
    cli = AgentCLI.from_spec(agent, isolate_home=not share_home, sandbox=mode)
    splitter = None
    if allow_model and split_with is None:
        raise fail("--allow-model goes with --split-with (for the parts its model writes)")
    if split_with is not None:
        from tenure.console.model_cmds import allowed, open_checked, planner_for
        from tenure.roles.coding.split import PlannerSplit

        allow = allowed(allow_model)
        if "commands" not in allow:
            raise fail(
                "--split-with: each part of a coding split carries a command check the "
                "model writes, which the leader runs; allow it with --allow-model commands"
            )
        splitter = PlannerSplit(planner_for(open_checked(split_with), allow), repo.resolve())
    leader = CodingLeader(
        CodingConfig(
            repo=repo.resolve(),
            plan=plan,
            agent=cli,
            workers=workers,
            run_id=run_id,
            splitter=splitter,
            store_url=store,
            lease_ttl=lease_ttl,
        )
    )
    resuming = git.branch_exists(leader.root, leader.integration)
    try:
        epoch = leader.claim()  # refused here, before anything is written, if the run is led
    except RunLeased as exc:
        raise fail(str(exc)) from None
    if resuming:
        out.print(
            f"resuming {leader.run_id}: its plan is its own plan.md "
            "(change it with tenure replan, not with PLAN)",
            soft_wrap=True,
        )
    for warning in overlapping_scopes(plan):
        out.print(f"[yellow]warning:[/] {safe_text(warning)}", soft_wrap=True)
    out.print(
        f"run [bold]{safe_text(leader.run_id)}[/] on {safe_text(leader.root)} with {cli.name}; "
        f"team {safe_text(team_for(leader.run_id))} in {safe_text(redact_url(leader.store_url))} "
        f"(epoch {epoch})",
        soft_wrap=True,
    )
    note = cli.sandbox_note()
    shown = safe_text(note)
    out.print(f"[bold red]{shown}[/]" if note.startswith("WARNING") else shown, soft_wrap=True)
    outcome = leader.run()
    for task_id, state in outcome.states.items():
        out.print(f"  {safe_text(f'{task_id:<24}')} {safe_text(state)}", soft_wrap=True)
    out.print(f"integration branch: {safe_text(outcome.integration_branch)}", soft_wrap=True)
    files = f"{outcome.integration_worktree}/.tenure/runs/{outcome.run}/"
    out.print(f"files: {safe_text(files)}", soft_wrap=True)
    if not outcome.done:
        raise fail(f"run {outcome.run} not done: {outcome.reason}")
    out.print(f"[green]done[/]: {safe_text(outcome.reason)}", soft_wrap=True)
    merge = f"git -C {leader.root} merge {outcome.integration_branch}"
    out.print(f"merge it: {safe_text(merge)}", soft_wrap=True)


@app.command("gc")
def gc(
    repo: RepoOption = Path("."),
    keep: Annotated[
        str | None,
        typer.Option("--into", help="Branch work must be merged into (default: checked out)."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Remove; without it, only list.")] = False,
) -> None:
    """List tenure worktrees and branches and whether they can go; remove only merged ones,
    and only with --yes. Unmerged work is never removed.

    Example: `tenure gc --repo ~/src/app` (then `--yes`)
    """
    root = git.repo_root(repo.resolve())
    items = plan_cleanup(root, keep)
    if not items:
        out.print("nothing to clean", soft_wrap=True)
        return
    for item in items:
        verb = ("remove" if yes else "would remove") if item.removable else "keep"
        where = f" ({item.path})" if item.path else ""
        shown = f"{verb:<13} {item.branch}{where}: {item.reason}"
        out.print(safe_text(shown), soft_wrap=True)
    if yes:
        # task branches first: an integration branch goes last
        for item in sorted(items, key=lambda i: i.branch.endswith("/integration")):
            if item.removable:
                remove(root, item)
    elif any(i.removable for i in items):
        out.print("run again with --yes to remove the merged ones", soft_wrap=True)


@app.command("discard")
def discard_attempts(
    run_id: Annotated[str, typer.Option("--run", help="The run whose failed attempts go.")],
    task: Annotated[str | None, typer.Option("--task", help="Only this task's attempts.")] = None,
    repo: RepoOption = Path("."),
    yes: Annotated[bool, typer.Option("--yes", help="Remove; without it, only list.")] = False,
) -> None:
    """List a coding run's failed attempts (rejected, interrupted, conflicted, cancelled)
    and, with --yes, delete their worktrees and branches, unmerged commits included. Never
    the integration branch, a running attempt, or an accepted one waiting to be merged.

    Example: `tenure discard --run run-20260101-120000 --task slug` (then `--yes`)
    """
    root = git.repo_root(repo.resolve())
    items = plan_discard(root, run_id, task)
    if not items:
        out.print(f"no attempt branches in run {run_id}", soft_wrap=True)
        return
    for item in items:
        verb = ("discard" if yes else "would discard") if item.removable else "keep"
        where = f" ({item.path})" if item.path else ""
        shown = f"{verb:<14} {item.branch}{where}: {item.reason}"
        out.print(safe_text(shown), soft_wrap=True)
    doomed = [i for i in items if i.removable]
    if yes:
        for item in doomed:
            discard(root, item.path, item.branch)
        out.print(f"discarded {len(doomed)} attempt(s); logs stay in .tenure/attempts/{run_id}/")
    elif doomed:
        out.print(
            f"run again with --yes to delete these {len(doomed)} attempt(s) and their "
            "unmerged commits",
            soft_wrap=True,
        )


@app.command("replan")
def replan(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="The new plan.")],
    run_id: Annotated[str, typer.Option("--run", help="The run to replan.")],
    reason: Annotated[str, typer.Option("--reason", help="Why; goes into plan.md.")],
    repo: RepoOption = Path("."),
    cancel_running: Annotated[
        bool,
        typer.Option(
            "--cancel-running/--let-running-finish",
            help="Cancel running attempts (with the reason) or let them finish first.",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for a running leader.")
    ] = 3600.0,
    store: CodeStoreOption = None,
) -> None:
    """Shift a coding run's goal: freeze dispatch, log the change in plan.md's changelog,
    re-derive the tasks not yet started (running ones finish or are cancelled).

    Example: `tenure replan new.yaml --run run-20260101-120000 --reason "drop the export"`
    """
    plan = load_plan(plan_path)
    root = git.repo_root(repo.resolve())
    check_tasks(root, plan)
    request = ReplanRequest(plan, cancel_running, reason)
    attempts = root / TENURE_DIR / "attempts" / run_id
    pid = live_leader(attempts)
    if pid is None:
        leader = CodingLeader(
            CodingConfig(
                repo=root,
                plan=plan,
                agent=AgentCLI.from_spec("script:true"),
                run_id=run_id,
                check_installed=False,
                store_url=store,
            )
        )
        try:
            notes = leader.replan(request)  # takes the run's lease for the change
        except RunLeased as exc:
            raise fail(str(exc)) from None
        for note in notes:
            out.print(f"  {safe_text(note)}", soft_wrap=True)
        out.print(f"replanned {run_id}; continue it with: tenure code PLAN --run {run_id}")
        return
    path = request.write(attempts)
    out.print(f"leader {pid} is running {run_id}: dispatch frozen, waiting for it to apply")
    deadline = time.monotonic() + timeout
    while path.exists():
        if time.monotonic() > deadline or live_leader(attempts) is None:
            raise fail(f"the replan was not applied yet; it stays queued in {path}")
        time.sleep(0.2)
    out.print(
        f"replanned {run_id}: see .tenure/runs/{run_id}/plan.md on tenure/{run_id}/integration"
    )
