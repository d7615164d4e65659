"""``tenure run``: a whole team on one machine, with live progress."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Collection
from contextlib import ExitStack
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group, RenderableType
from rich.live import Live

from tenure.console.app import PassEnvOption, StoreOption, app, fail, out, pass_env, store_url
from tenure.console.keys_cmds import InsecureOption, KeysOption, keys_root, member_credentials
from tenure.console.model_cmds import (
    AllowOption,
    ArtifactOption,
    GoalOption,
    ModelOption,
    allowed,
    open_checked,
    preflight,
    resolve_plan,
)
from tenure.console.processes import spawn, stop_all
from tenure.console.safe import safe_text
from tenure.console.state_cmds import team_table
from tenure.console.tree import team_tree_table
from tenure.coord import Credentials, LeaseTiming
from tenure.coord.credentials import init_team
from tenure.executors import SPEC_HELP, resolve_executor
from tenure.models import ENV_MODEL
from tenure.protocol import Plan, PlanTask
from tenure.protocol.plan import SUBTEAM_CAPABILITY, plan_executors, team_tree
from tenure.protocol.secrets import redact_url
from tenure.roles import Leader, LeaderConfig, LocalTeam, enqueue_plan
from tenure.roles.features import Splitter
from tenure.store import Store, open_store


class Mode(StrEnum):
    team = "team"
    local = "local"
    queue = "queue"


@app.command()
def run(
    plan: Annotated[
        Path | None, typer.Argument(help="Plan file (plan.yaml or plan.md), or use --goal.")
    ] = None,
    store: StoreOption = None,
    workers: Annotated[
        int, typer.Option("--workers", "-w", min=1, max=64, help="Worker count.")
    ] = 2,
    mode: Annotated[
        Mode, typer.Option(help="team: processes; local: threads; queue: no leader.")
    ] = Mode.team,
    executor: Annotated[str, typer.Option("--exec", help=f"Executor: {SPEC_HELP}.")] = "noop",
    ttl: Annotated[float, typer.Option(help="Lease TTL in seconds.")] = 3.0,
    state_dir: Annotated[Path, typer.Option(help="Members' local state.")] = Path(".tenure"),
    workdir: Annotated[
        Path | None, typer.Option(help="Where tasks and command checks run.")
    ] = None,
    goal: GoalOption = None,
    artifact: ArtifactOption = None,
    model: ModelOption = None,
    team: Annotated[str, typer.Option("--team", "-t", help="Team path of a --goal plan.")] = (
        "default"
    ),
    keys: KeysOption = None,
    insecure: InsecureOption = False,
    allow_model: AllowOption = None,
    pass_names: PassEnvOption = None,
) -> None:
    """Run a plan with a leader and N workers on one machine, showing progress.

    In team and queue mode the members are processes that sign what they send: the
    keys they need are made in the key directory (default .tenure/keys) if missing.

    With `--goal` and `--artifact`, the model (`--model` or TENURE_MODEL) plans first;
    `--exec llm` makes the workers that model too. Exit status: 0 when every task is
    done, 3 when some wait in the inbox.

    Example: `tenure run plan.yaml --workers 4 --exec "command:python3 agent.py"`

    Example: `tenure run --goal "Price our vendors" --artifact vendors/ --exec llm --model openai:gpt-4.1`
    """
    if plan is None and not goal:
        raise fail("give a PLAN file, or --goal with --artifact to have the model plan")
    allow = allowed(allow_model)
    pass_env(pass_names)  # the workers started below inherit it
    if executor == "llm" and model:
        executor = f"llm:{model}"  # worker processes get the same model
    preflight(executor)  # refuse a bad spec or model before anything starts
    url = store_url(store)
    with ExitStack() as stack:  # a store only when planning: its rejections go to the log
        planning_store = stack.enter_context(open_store(url)) if goal else None
        found, splitter = resolve_plan(
            plan,
            goal,
            artifact,
            model,
            team=team,
            workdir=workdir,
            store=planning_store,
            save_dir=state_dir,
            allow=allow,
        )
    assert found is not None
    loaded = found
    if mode is not Mode.team and len(team_tree(loaded)) > 1:
        raise fail("a plan with nested teams runs in --mode team (sub-leaders are processes)")
    _nested_executors(loaded.tasks, "")  # nested tasks' executors, errors naming the path
    _nested_planner(loaded, model)
    for each in team_tree(loaded):  # the plan's own executors, and its cost budgets,
        preflight(executor, each)  # in every nested team too
    started = time.monotonic()
    with open_store(url) as opened:
        if mode is Mode.local:
            local = LocalTeam(
                opened,
                loaded,
                resolve_executor(executor),
                workers=workers,
                timing=LeaseTiming(ttl=ttl),
                state_dir=state_dir,
                workdir=workdir,
                splitter=splitter,
            )
            _watch(opened, loaded, local.run)
        else:
            _run_processes(
                opened,
                url,
                loaded,
                mode,
                workers,
                executor,
                ttl,
                state_dir,
                workdir,
                splitter,
                model,
                None if insecure else keys_root(keys),
                allow,
            )
        raise typer.Exit(_summary(opened, loaded, time.monotonic() - started))


def _run_processes(
    store: Store,
    url: str,
    plan: Plan,
    mode: Mode,
    workers: int,
    executor: str,
    ttl: float,
    state_dir: Path,
    workdir: Path | None,
    splitter: Splitter | None = None,
    model: str | None = None,
    keys: Path | None = None,
    allow: Collection[str] = (),
) -> None:
    if not store.shared_across_processes:  # each worker process would get a store of its own
        raise fail(f"store {redact_url(url)}: worker processes cannot share it; use --mode local")
    if mode is Mode.queue:
        # a claim lasts as long as the message stays invisible: cover the longest task
        longest = max(t.deadline_seconds for t in plan.tasks)
        extra = ["--queue", "--visibility", f"{longest + 5:g}"]
    else:
        extra = []
    members = {
        each.team: [f"{_prefix(plan, each)}{n}" for n in range(1, workers + 1)]
        for each in team_tree(plan)  # a nested plan: workers for every team of the tree
    }
    credentials = _credentials(store, plan, members, keys)
    signing = ["--keys", str(keys)] if keys is not None else ["--insecure"]
    procs = []
    for each in team_tree(plan):
        common = team_worker_args(each, executor, state_dir, workdir, model=model, allow=allow)
        procs += [
            spawn(["worker", *common, *signing, "--id", member, *extra], store_url=url)
            for member in members[each.team]
        ]
    try:
        if mode is Mode.queue:
            enqueue_plan(store, plan, credentials=credentials)
            _watch(store, plan, lambda stop: _wait_settled(store, plan, stop))
        else:
            config = LeaderConfig(
                team=plan.team,
                member_id="leader",
                priority=100,
                timing=LeaseTiming(ttl=ttl),
                state_dir=state_dir,
                workdir=workdir,
                stale_grace=ttl,
                member_ttl=ttl,
                credentials=credentials,
            )
            leader = Leader(store, config, plan, splitter=splitter)
            _watch(store, plan, leader.run)
    finally:
        stop_all(procs)


def _prefix(plan: Plan, each: Plan) -> str:
    return "worker-" if each is plan else each.team.rsplit("/", 1)[1] + "-w"


def _credentials(
    store: Store, plan: Plan, members: dict[str, list[str]], keys: Path | None
) -> Credentials | None:
    """The leader's credentials, with a key made for every member it spawns (kept if
    the key directory has them); None for ``--insecure`` (said and logged)."""
    if keys is None:
        return member_credentials(store, None, True, plan.team, "leader", "lead")
    for team, ids in members.items():
        init_team(keys, team, ids)
    return Credentials.load(keys, plan.team, "leader", "lead")


def _nested_executors(tasks: list[PlanTask], where: str) -> None:
    for index, task in enumerate(tasks):
        if task.team is not None:
            here = f"{where}tasks[{index}].team."
            for inner, sub in enumerate(task.team.tasks):
                if sub.executor:
                    resolve_executor(sub.executor, field=f"{here}tasks[{inner}].executor")
            _nested_executors(task.team.tasks, here)


def _nested_planner(plan: Plan, model: str | None) -> None:
    """A goal-only nested team is planned by its sub-leader: refuse to start without a
    usable model (``--model`` was checked already; TENURE_MODEL is checked here)."""
    goal_only = [each.team for each in team_tree(plan)[1:] if not each.tasks]
    if not goal_only or model:
        return
    if not os.environ.get(ENV_MODEL, "").strip():
        raise fail(
            f"nested team {goal_only[0]} has a goal and no tasks: its sub-leader plans it "
            "with a model: give --model or set TENURE_MODEL"
        )
    open_checked(None)


def team_worker_args(
    plan: Plan,
    executor: str,
    state_dir: Path,
    workdir: Path | None,
    *,
    model: str | None = None,
    allow: Collection[str] = (),
) -> list[str]:
    """``tenure worker`` options for one team of a (possibly nested) plan; sub-leaders
    get the ``model`` that plans goal-only nested teams (else they read TENURE_MODEL)
    and the operator's ``--allow-model`` for what that model writes.
    A goal-only team's workers get no capability: its tasks are not written yet. The
    store URL is not among them: a worker gets it in TENURE_STORE (see ``spawn``)."""
    args = ["--team", plan.team, "--exec", executor]
    args += ["--state-dir", str(state_dir)]
    for spec in plan_executors(plan):  # the operator's plan names them: its workers may run them
        args += ["--allow-exec", spec]
    if workdir is not None:
        args += ["--workdir", str(workdir)]
    # every worker runs the same executor, so each takes every capability the plan asks
    needed = {t.capability for t in plan.tasks if t.capability}
    for capability in sorted(needed - {SUBTEAM_CAPABILITY}):
        args += ["--capability", capability]
    if any(t.team is not None for t in plan.tasks):
        args.append("--sub-leader")  # composite tasks: these members lead the nested teams
        if model:
            args += ["--model", model]
        for each in sorted(allow):
            args += ["--allow-model", each]
    return args


def _wait_settled(store: Store, plan: Plan, stop: threading.Event) -> str:
    while not stop.is_set():
        if all(t.state not in ("queued", "running", "review") for t in store.tasks(plan.team)):
            return "finished"
        stop.wait(0.05)
    return "stopped"


def _watch(store: Store, plan: Plan, body: object) -> None:
    """Run ``body(stop)`` in a thread while a live table shows the register."""
    stop = threading.Event()
    worker = threading.Thread(target=body, args=(stop,), daemon=True)  # type: ignore[arg-type]
    worker.start()
    try:
        with Live(_view(store, plan), console=out, refresh_per_second=4, transient=False) as live:
            while worker.is_alive():
                worker.join(timeout=0.25)
                live.update(_view(store, plan))
    except KeyboardInterrupt:
        stop.set()
        worker.join(timeout=10)
        raise


def _view(store: Store, plan: Plan) -> RenderableType:
    """The team's table; a nested plan's tree of teams above it."""
    teams = [each.team for each in team_tree(plan)]
    if len(teams) == 1:
        return team_table(store, plan.team)
    return Group(team_tree_table(store, teams), team_table(store, plan.team))


def _summary(store: Store, plan: Plan, elapsed: float) -> int:
    states = Counter(t.state for t in store.tasks(plan.team))
    parts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    out.print()
    out.print(f"[bold]{safe_text(plan.team)}[/]: {parts} in {elapsed:.1f}s")
    waiting = states["blocked"] + states["failed"]
    if waiting:
        out.print(f"{waiting} task(s) need a person: see [bold]tenure inbox[/]")
        return 3
    return 0
