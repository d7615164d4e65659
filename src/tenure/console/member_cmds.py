"""``tenure leader`` and ``tenure worker``: one member of a team per process."""

from __future__ import annotations

import os
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from tenure.console.app import PassEnvOption, StoreOption, app, fail, out, pass_env, store_url
from tenure.console.keys_cmds import InsecureOption, KeysOption, member_credentials
from tenure.console.model_cmds import (
    AllowOption,
    ArtifactOption,
    GoalOption,
    ModelAllow,
    ModelOption,
    allowed,
    open_checked,
    planner_for,
    preflight,
    resolve_plan,
)
from tenure.console.processes import stop_on_signals
from tenure.console.safe import safe_text
from tenure.coord import LeaseTiming
from tenure.executors import SPEC_HELP, resolve_executor
from tenure.models import ENV_MODEL
from tenure.protocol import new_id
from tenure.roles import Follower, FollowerConfig, Leader, LeaderConfig
from tenure.roles import teams as team_kinds
from tenure.roles.planning import Planner
from tenure.store import open_store

PlanArgument = Annotated[Path | None, typer.Argument(help="Plan file (plan.yaml or plan.md).")]
StateDir = Annotated[Path, typer.Option(help="Where this member keeps its highest-seen epoch.")]


@app.command()
def leader(
    plan: PlanArgument = None,
    store: StoreOption = None,
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="Team path (default: the plan's).")
    ] = None,
    member_id: Annotated[
        str | None, typer.Option("--id", help="Member id (default: random).")
    ] = None,
    priority: Annotated[int, typer.Option(help="Election priority; highest claims first.")] = 0,
    ttl: Annotated[float, typer.Option(help="Lease TTL in seconds.")] = 3.0,
    keep_running: Annotated[bool, typer.Option(help="Stay leader after the plan is done.")] = False,
    state_dir: StateDir = Path(".tenure"),
    workdir: Annotated[Path | None, typer.Option(help="Where command checks run.")] = None,
    duplicate_assignments: Annotated[
        bool, typer.Option(help="Fault injection: send every envelope twice.")
    ] = False,
    goal: GoalOption = None,
    artifact: ArtifactOption = None,
    model: ModelOption = None,
    keys: KeysOption = None,
    insecure: InsecureOption = False,
    allow_model: AllowOption = None,
    pass_names: PassEnvOption = None,
) -> None:
    """Campaign for a team's lease and lead it: load the plan, dispatch, verify, retry.

    Start several on one store for failover; the highest priority leads. It signs with
    the team's lead key (`tenure keys init`) and obeys no unsigned result.

    Example: `tenure leader plan.yaml --store sqlite:///team.db --id lead-1 --priority 10`
    """
    if goal and not team:
        raise fail("say which team the planned work is for: --team")
    allow = allowed(allow_model)
    pass_env(pass_names)  # command checks run with them
    with ExitStack() as stack:  # a store only when planning: its rejections go to the log
        planning_store = stack.enter_context(open_store(store_url(store))) if goal else None
        loaded, splitter = resolve_plan(
            plan,
            goal,
            artifact,
            model,
            team=team or "default",
            workdir=workdir,
            store=planning_store,
            save_dir=state_dir,
            allow=allow,
        )
    name = team or (loaded.team if loaded else None)
    if name is None:
        raise fail("say which team to lead: give a PLAN or --team")
    config = LeaderConfig(
        team=name,
        member_id=member_id or f"leader-{new_id()[-6:].lower()}",
        priority=priority,
        timing=LeaseTiming(ttl=ttl),
        state_dir=state_dir,
        workdir=workdir,
        exit_when_done=not keep_running,
        duplicate_assignments=duplicate_assignments,
        stale_grace=ttl,
        member_ttl=ttl,  # a dead leader must not outlive its lease in the election ranks
    )
    stop = threading.Event()
    stop_on_signals(stop)
    with open_store(store_url(store)) as opened:
        config.credentials = member_credentials(
            opened, keys, insecure, name, config.member_id, "lead"
        )
        outcome = Leader(opened, config, loaded, splitter=splitter).run(stop)
    out.print(f"leader {safe_text(config.member_id)}: {safe_text(outcome)}")


@app.command()
def worker(
    store: StoreOption = None,
    team: Annotated[str, typer.Option("--team", "-t", help="Team path to join.")] = "default",
    member_id: Annotated[
        str | None, typer.Option("--id", help="Member id (default: random).")
    ] = None,
    executor: Annotated[str, typer.Option("--exec", help=f"Executor: {SPEC_HELP}.")] = "noop",
    capability: Annotated[
        list[str] | None, typer.Option("--capability", "-c", help="A capability (repeatable).")
    ] = None,
    priority: Annotated[int, typer.Option(help="Preference when several workers are idle.")] = 0,
    queue: Annotated[
        bool, typer.Option("--queue", help="Take work from the shared queue (queue mode).")
    ] = False,
    state_dir: StateDir = Path(".tenure"),
    workdir: Annotated[Path | None, typer.Option(help="Working directory for tasks.")] = None,
    member_ttl: Annotated[float, typer.Option(help="Liveness TTL in seconds.")] = 3.0,
    visibility: Annotated[
        float | None,
        typer.Option(
            help="Visibility timeout of taken messages, seconds (default 30; with --queue 330: "
            "keep it above the longest task deadline).",
            show_default=False,
        ),
    ] = None,
    duplicate_results: Annotated[
        bool, typer.Option(help="Fault injection: send every result twice.")
    ] = False,
    sub_leader: Annotated[
        bool,
        typer.Option(
            "--sub-leader",
            help="Also lead the nested team of any composite task this member is given, and "
            "while idle stand in for a silent sub-leader of this team inside its nested team "
            "(offers the 'subteam' capability; the nested lease TTL is --member-ttl).",
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="With --sub-leader: PROVIDER:MODEL[@BASE_URL] that plans a nested team given "
            "as a goal with no tasks (default: TENURE_MODEL).",
            show_default=False,
        ),
    ] = None,
    allow_exec: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-exec",
            help="An executor an envelope may ask for instead of --exec (repeatable); "
            "nothing else an envelope names ever runs.",
        ),
    ] = None,
    keys: KeysOption = None,
    insecure: InsecureOption = False,
    allow_model: AllowOption = None,
    pass_names: PassEnvOption = None,
) -> None:
    """Join a team and execute the envelopes its leader sends, until stopped.

    It obeys only envelopes the team's lead key signed and signs its own results
    with its member key (`tenure keys add --team T --member ID`).

    Example: `tenure worker --store redis://10.0.0.5:6379/0 --team acme --id w1 --exec "command:./agent.sh"`
    """
    pass_env(pass_names)
    chosen = resolve_executor(executor, field="--exec")
    preflight(chosen)  # a model worker checks its model's settings and server first
    planner = _sub_leader_planner(model, sub_leader, allow_model)
    member = member_id or f"worker-{new_id()[-6:].lower()}"
    stop = threading.Event()
    stop_on_signals(stop)
    allowed = tuple(allow_exec or ())
    for spec in allowed:
        resolve_executor(spec, field="--allow-exec")
    with open_store(store_url(store)) as opened:
        credentials = member_credentials(opened, keys, insecure, team, member, "work")
        if queue:
            team_kinds.QueueWorker(
                opened,
                team,
                member,
                chosen,
                visibility_timeout=visibility or 330.0,
                workdir=workdir,
                credentials=credentials,
                allowed_executors=allowed,
            ).run(stop)
            return
        config = FollowerConfig(
            team=team,
            member_id=member,
            priority=priority,
            capabilities=tuple(capability or ()),
            member_ttl=member_ttl,
            visibility_timeout=visibility or 30.0,
            state_dir=state_dir,
            workdir=workdir,
            duplicate_results=duplicate_results,
            credentials=credentials,
            allowed_executors=allowed,
        )
        if sub_leader:
            timing = LeaseTiming(ttl=member_ttl)
            team_kinds.sub_leader(opened, config, chosen, timing=timing, planner=planner).run(stop)
            return
        Follower(opened, config, chosen).run(stop)


def _sub_leader_planner(
    flag: str | None, sub_leader: bool, allow_model: list[ModelAllow] | None = None
) -> Planner | None:
    """A sub-leader's planner for goal-only nested teams: from --model or TENURE_MODEL,
    checked now (one line if it cannot be used); none when neither names a model.
    ``--allow-model`` is what the operator lets that model's plans add."""
    if not sub_leader:
        if flag:
            raise fail(
                "--model goes with --sub-leader (it plans nested teams); a model "
                "worker names its model in --exec llm:MODEL"
            )
        if allow_model:
            raise fail("--allow-model goes with --sub-leader (for the plans its model writes)")
        return None
    allow = allowed(allow_model)
    if not (flag or os.environ.get(ENV_MODEL, "").strip()):
        return None
    return planner_for(open_checked(flag), allow)
