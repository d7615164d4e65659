"""``tenure code`` (a coding-agent team on a git repository), ``tenure gc``, ``tenure
discard``, and the coding side of ``tenure replan``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from tenure.console import jsonout, params
from tenure.console.agents_cmds import (
    AgentArgOption,
    AgentBareOption,
    AgentMcpOption,
    AgentModelOption,
    agent_from_options,
)
from tenure.console.app import PassEnvOption, app, fail, out, pass_env
from tenure.console.coding_view import report, run_with_progress
from tenure.console.jsonout import JsonOption
from tenure.console.model_cmds import AllowOption
from tenure.console.safe import safe_text
from tenure.executors import git
from tenure.executors.agent_cli import AGENT_HELP, AgentCLI
from tenure.executors.sandbox import SandboxMode
from tenure.executors.worktrees import TENURE_DIR, discard, plan_cleanup, remove
from tenure.protocol.codec import load_plan
from tenure.protocol.secrets import redact_url
from tenure.roles.coding import CodingConfig, CodingLeader, RunLeased, check_coding_plan, team_for
from tenure.roles.coding.discard import plan_discard
from tenure.roles.coding.lease import DEFAULT_LEASE_TTL
from tenure.roles.coding.replan import ReplanRequest, live_leader
from tenure.roles.coding.scope import check_tasks, overlapping_scopes

RepoOption = Annotated[
    Path, typer.Option("--workdir", help="The target git repository (clean working tree).")
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
        callback=params.store,
    ),
]


@app.command("code")
def code(
    ctx: typer.Context,
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="plan.yaml / plan.md")],
    repo: RepoOption = Path("."),
    agent: Annotated[str, typer.Option("--agent", help=AGENT_HELP)] = "claude",
    agent_model: AgentModelOption = None,
    agent_bare: AgentBareOption = False,
    agent_arg: AgentArgOption = None,
    agent_mcp: AgentMcpOption = False,
    workers: Annotated[
        int,
        typer.Option("--workers", "-w", help="Parallel attempts (1 to 64).", callback=params.between(1, 64)),
    ] = 2,
    run_id: Annotated[
        str | None,
        typer.Option("--run", help="Run id; an existing one is resumed.", callback=params.ident),
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
        typer.Option(
            "--lease-ttl",
            help=f"Seconds the leader's lease lasts without renewal ({params.MIN_TTL:g} to {params.MAX_TTL:g}).",
            callback=params.ttl(),
        ),
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
    as_json: JsonOption = False,
) -> None:
    """Run a plan with coding agents: one git worktree per attempt (agents sandboxed in
    bubblewrap where it works), checks run by the leader on a fresh checkout of the
    attempt's commit, accepted commits merged into tenure/RUN/integration in plan
    order. Files: .tenure/runs/RUN/ on that branch; state: the team code/RUN in the store
    (`tenure status --team code/RUN`, `tenure inbox`, `tenure answer --team code/RUN`).

    Example: `tenure code plan.yaml --workdir ~/src/app --agent claude --workers 3 --share-home`

    Local model: `tenure code plan.yaml --agent codex --agent-model openai:qwen2.5-coder@http://localhost:8080/v1`
    (`tenure agents` shows what each preset runs).
    """
    ctx.with_resource(jsonout.people_on_stderr(as_json))  # --json: stdout holds it alone
    pass_env(pass_names)
    plan = load_plan(plan_path)
    if no_sandbox and require_sandbox:
        raise fail("--no-sandbox and --require-sandbox contradict each other; pick one")
    mode: SandboxMode = "off" if no_sandbox else "bwrap" if require_sandbox else "auto"
    cli = agent_from_options(
        agent,
        model=agent_model,
        bare=agent_bare,
        extra_args=agent_arg,
        isolate_home=not share_home,
        sandbox=mode,
        mcp=agent_mcp,
    )
    unreachable = cli.model.unreachable() if cli.model is not None else None
    if unreachable:
        out.print(
            f"WARNING: {unreachable}; the agents retry until their task deadline",
            soft_wrap=True,
            markup=False,
        )
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
            agent_mcp=agent_mcp,
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
    report(leader, run_with_progress(leader, workers), as_json=as_json)


@app.command("gc")
def gc(
    repo: RepoOption = Path("."),
    keep: Annotated[
        str | None,
        typer.Option("--into", help="Branch work must be merged into (default: checked out)."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Remove; without it, only list.")] = False,
    as_json: JsonOption = False,
) -> None:
    """List tenure worktrees and branches and whether they can go; remove only merged ones,
    and only with --yes. Unmerged work is never removed.

    Example: `tenure gc --workdir ~/src/app` (then `--yes`)
    """
    root = git.repo_root(repo.resolve())
    items = plan_cleanup(root, keep)
    if as_json:
        _remove_merged(root, items, yes)
        jsonout.emit("gc", items=[_item(i, yes) for i in items], removed=yes)
        return
    if not items:
        out.print("nothing to clean", soft_wrap=True)
        return
    for item in items:
        verb = ("remove" if yes else "would remove") if item.removable else "keep"
        where = f" ({item.path})" if item.path else ""
        shown = f"{verb:<13} {item.branch}{where}: {item.reason}"
        out.print(safe_text(shown), soft_wrap=True)
    _remove_merged(root, items, yes)
    if not yes and any(i.removable for i in items):
        out.print("run again with --yes to remove the merged ones", soft_wrap=True)


@app.command("discard")
def discard_attempts(
    run_id: Annotated[
        str,
        typer.Option("--run", help="The run whose failed attempts go.", callback=params.ident),
    ],
    task: Annotated[str | None, typer.Option("--task", help="Only this task's attempts.")] = None,
    repo: RepoOption = Path("."),
    yes: Annotated[bool, typer.Option("--yes", help="Remove; without it, only list.")] = False,
    as_json: JsonOption = False,
) -> None:
    """List a coding run's failed attempts (rejected, interrupted, conflicted, cancelled)
    and, with --yes, delete their worktrees and branches, unmerged commits included. Never
    the integration branch, a running attempt, or an accepted one waiting to be merged.

    Example: `tenure discard --run run-20260101-120000 --task slug` (then `--yes`)
    """
    root = git.repo_root(repo.resolve())
    items = plan_discard(root, run_id, task)
    if as_json:
        for item in items if yes else []:
            if item.removable:
                discard(root, item.path, item.branch)
        jsonout.emit("discard", run=run_id, items=[_item(i, yes) for i in items], removed=yes)
        return
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


def _remove_merged(root: Path, items: list[Any], yes: bool) -> None:
    if yes:  # task branches first: an integration branch goes last
        for item in sorted(items, key=lambda i: i.branch.endswith("/integration")):
            if item.removable:
                remove(root, item)


def _item(item: Any, yes: bool) -> dict[str, Any]:
    """A branch (and worktree) ``gc`` or ``discard`` lists, as ``--json`` shows it."""
    path = getattr(item, "path", None)
    return {
        "branch": item.branch,
        "path": str(path) if path else None,
        "removable": item.removable,
        "removed": bool(yes and item.removable),
        "reason": item.reason,
    }


def replan_run(
    plan_path: Path,
    run_id: str,
    reason: str,
    repo: Path,
    cancel_running: bool,
    timeout: float,
    store: str | None,
) -> None:
    """``tenure replan --run RUN``: a coding run's goal shift (files in git included)."""
    plan = load_plan(plan_path)
    root = git.repo_root(repo.resolve())
    check_tasks(root, plan)
    check_coding_plan(plan)  # what the run's leader would refuse, before it is asked
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
