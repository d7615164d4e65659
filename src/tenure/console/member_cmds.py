"""``tenure leader`` and ``tenure worker``: one member of a team per process."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from tenure.console import jsonout, params
from tenure.console.app import (
    PassEnvOption,
    StoreOption,
    app,
    err,
    fail,
    out,
    pass_env,
    store_url,
)
from tenure.console.exits import Exit, settled_exit
from tenure.console.jsonout import JsonOption
from tenure.console.keys_cmds import (
    InsecureOption,
    KeysOption,
    load_credentials,
    say_unsigned,
)
from tenure.console.member_store import confirmed, lost_exit, patient
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
from tenure.console.processes import STOP_GRACE, stop_on_signals
from tenure.console.progress import WorkerNarrator, following
from tenure.console.safe import safe_text
from tenure.console.standing import FreshOption, settle_standing
from tenure.coord import LeaseTiming
from tenure.executors import SPEC_HELP, resolve_executor
from tenure.executors.paths import check_task_paths
from tenure.executors.process_group import kill_live_children
from tenure.models import ENV_MODEL
from tenure.protocol import new_id
from tenure.protocol.secrets import redact_url
from tenure.roles import Follower, FollowerConfig, Leader, LeaderConfig
from tenure.roles import teams as team_kinds
from tenure.roles.planning import Planner
from tenure.roles.register import WAITING_STATES
from tenure.roles.teams import reading
from tenure.roles.teams.leader import check_leader_plan
from tenure.roles.teams.reading import state_of
from tenure.store import open_store
from tenure.store.patient import PatientStore

MemberOption = Annotated[
    str | None,
    typer.Option("--member", help="Member id (default: random).", callback=params.ident),
]
TtlOption = Annotated[
    float,
    typer.Option(
        "--lease-ttl",
        help=f"Lease TTL in seconds ({params.MIN_TTL:g} to {params.MAX_TTL:g}).",
        callback=params.ttl(),
    ),
]
PlanArgument = Annotated[
    Path | None, typer.Argument(metavar="PLAN", help="Plan file (plan.yaml or plan.md).")
]
StateDir = Annotated[Path, typer.Option(help="Where this member keeps its highest-seen epoch.")]


@app.command()
def leader(
    ctx: typer.Context,
    plan: PlanArgument = None,
    store: StoreOption = None,
    team: Annotated[
        str | None,
        typer.Option("--team", "-t", help="Team path (default: the plan's).", callback=params.team),
    ] = None,
    member_id: MemberOption = None,
    priority: Annotated[
        int,
        typer.Option(
            help="Election priority, highest claims first "
            f"({params.MIN_PRIORITY} to {params.MAX_PRIORITY}).",
            callback=params.priority(),
        ),
    ] = 0,
    ttl: TtlOption = 3.0,
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
    fresh: FreshOption = False,
    as_json: JsonOption = False,
) -> None:
    """Campaign for a team's lease and lead it: load the plan, dispatch, verify, retry.

    Start several on one store for failover; the highest priority leads. It signs with
    the team's lead key (`tenure keys init`) and obeys no unsigned result. Exit status:
    0 when every task is done, 3 when some wait in the inbox, 4 when its store was
    replaced under it (the table of every status: docs/operations.md). A store outage
    is waited out (TENURE_STORE_PATIENCE seconds). A plan its team finished already is
    not run again; a changed one is refused (change it with `tenure replan`).

    Example: `tenure leader plan.yaml --store sqlite:///team.db --member lead-1 --priority 10`
    """
    ctx.with_resource(jsonout.people_on_stderr(as_json))  # --json: stdout holds it alone
    if goal and not team:
        raise fail("say which team the planned work is for: --team")
    allow = allowed(allow_model)
    pass_env(pass_names)  # command checks run with them
    url = store_url(store)
    chosen = member_id or f"leader-{new_id()[-6:].lower()}"
    # every check before any store is opened: a refusal makes no file, directory or key
    planning = partial(
        resolve_plan,
        plan,
        goal,
        artifact,
        model,
        workdir=workdir,
        log_to=partial(open_store, url),  # a store only when planning: rejections go to its log
        save_dir=state_dir,
        allow=allow,
    )
    loaded, splitter = (None, None) if goal else planning(team=team or "default")
    name = team or (loaded.team if loaded else None)
    if name is None:
        raise fail("say which team to lead: give a PLAN or --team")
    credentials = load_credentials(keys, insecure, name, chosen, "lead")
    if goal:
        loaded, splitter = planning(team=name)
    if loaded is not None:  # what the leader would refuse of it, refused before the store
        check_leader_plan(loaded, splitter=splitter)
        check_task_paths(loaded.tasks, workdir)
    config = LeaderConfig(
        team=name,
        member_id=chosen,
        priority=priority,
        timing=LeaseTiming(ttl=ttl),
        state_dir=state_dir,
        workdir=workdir,
        exit_when_done=not keep_running,
        duplicate_assignments=duplicate_assignments,
        stale_grace=ttl,
        member_ttl=ttl,  # a dead leader must not outlive its lease in the election ranks
        credentials=credentials,
    )
    stop = threading.Event()
    who = f"leader {config.member_id}"
    stop_on_signals(
        stop,
        said=partial(_stopping, who),
        grace=STOP_GRACE,
        abandoned=partial(_abandoned, who),
    )
    with open_store(url) as raw:
        opened = patient(raw, team=name, member=config.member_id, stop=stop)
        if loaded is not None and not fresh and not settle_standing(opened, loaded):
            if as_json:
                states: list[str] = [t.state for t in opened.tasks(name)]
                _leader_json(config.member_id, name, "already done", Exit.OK, states)
            raise typer.Exit(Exit.OK)  # checked before the credentials say anything
        if credentials is None:
            say_unsigned(opened, name, config.member_id, "lead")
        if loaded is not None and fresh:
            settle_standing(opened, loaded, fresh=True, credentials=config.credentials)
        leading = Leader(opened, config, loaded, splitter=splitter)
        result = leading.run(stop)
        confirmed(opened)  # a store replaced under it: one line, never "done"
        states = [state_of(t) for t in reading.tasks(opened, name)]
    out.print(f"leader {safe_text(config.member_id)} of {safe_text(str(result))}", soft_wrap=True)
    # stopped (a signal) before the plan settled: 0, whatever waits
    code = settled_exit(states) if leading.settled else Exit.OK
    if as_json:
        outcome = {Exit.OK: "done", Exit.WAITING: "waiting"}[code] if leading.settled else "stopped"
        _leader_json(config.member_id, name, outcome, code, states)
    if leading.settled:
        if code == Exit.WAITING:
            waiting = sum(s in (*WAITING_STATES, "tampered") for s in states)
            out.print(f"{waiting} task(s) need a person: see [bold]tenure inbox[/]")
        raise typer.Exit(code)


def _leader_json(member: str, team: str, outcome: str, code: int, states: Sequence[str]) -> None:
    tally = {s: states.count(s) for s in sorted(set(states))}
    jsonout.emit("leader", member=member, team=team, outcome=outcome, exit=int(code), counts=tally)


@app.command()
def worker(
    store: StoreOption = None,
    team: Annotated[
        str, typer.Option("--team", "-t", help="Team path to join.", callback=params.team)
    ] = "default",
    member_id: MemberOption = None,
    executor: Annotated[str, typer.Option("--exec", help=f"Executor: {SPEC_HELP}.")] = "noop",
    capability: Annotated[
        list[str] | None, typer.Option("--capability", "-c", help="A capability (repeatable).")
    ] = None,
    priority: Annotated[
        int,
        typer.Option(
            help="Preference when several workers are idle, highest first "
            f"({params.MIN_PRIORITY} to {params.MAX_PRIORITY}).",
            callback=params.priority(),
        ),
    ] = 0,
    queue: Annotated[
        bool, typer.Option("--queue", help="Take work from the shared queue (queue mode).")
    ] = False,
    concurrency: params.ConcurrencyOption = 1,
    state_dir: StateDir = Path(".tenure"),
    workdir: Annotated[Path | None, typer.Option(help="Working directory for tasks.")] = None,
    member_ttl: Annotated[
        float,
        typer.Option(
            help=f"Liveness TTL in seconds ({params.MIN_TTL:g} to {params.MAX_TTL:g}).",
            callback=params.ttl(),
        ),
    ] = 3.0,
    visibility: Annotated[
        float | None,
        typer.Option(
            help="Visibility timeout of taken messages, seconds (default 30; with --queue 330: "
            "keep it above the longest task deadline).",
            show_default=False,
            callback=params.seconds(),
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
    with its member key (`tenure keys add --team T --member ID`). A store outage is
    waited out (TENURE_STORE_PATIENCE seconds); a store replaced under it stops it,
    exit status 4.

    Example: `tenure worker --store redis://10.0.0.5:6379/0 --team acme --member w1 --exec "command:./agent.sh"`

    Example: `tenure worker --team acme --member w2 --exec llm:openai:gpt-4.1 --concurrency 16`
    """
    if sub_leader and concurrency > 1:
        raise fail("--concurrency goes with plain workers: a --sub-leader runs one attempt at a time")
    pass_env(pass_names)
    chosen = resolve_executor(executor, field="--exec")
    preflight(chosen)  # a model worker checks its model's settings and server first
    planner = _sub_leader_planner(model, sub_leader, allow_model)
    member = member_id or f"worker-{new_id()[-6:].lower()}"
    stop = threading.Event()
    said = partial(_stopping, f"worker {member}")
    stop_on_signals(  # its executors' processes too; in-process ones see ctx.cancelled
        stop,
        also=kill_live_children,
        said=said,
        grace=STOP_GRACE,
        abandoned=partial(_abandoned, f"worker {member}"),
    )
    atexit.register(kill_live_children)
    allowed = tuple(allow_exec or ())
    for spec in allowed:
        resolve_executor(spec, field="--allow-exec")
    # checked before the store is opened: a refusal makes no file, directory or key
    credentials = load_credentials(keys, insecure, team, member, "work", named=bool(member_id))
    kind = "queue" if queue else "sub-leader" if sub_leader else "team"
    _banner(member, team, store_url(store), executor, kind)
    narrator = WorkerNarrator(member, _say)
    with (
        open_store(store_url(store)) as raw,
        following(store_url(store), team, narrator, narrator.tick),
    ):
        opened = patient(raw, team=team, member=member, stop=stop)
        if credentials is None:
            say_unsigned(opened, team, member, "work")
        if queue:
            team_kinds.QueueWorker(
                opened,
                team,
                member,
                chosen,
                visibility_timeout=visibility or 330.0,
                member_ttl=member_ttl,
                workdir=workdir,
                credentials=credentials,
                allowed_executors=allowed,
                concurrency=concurrency,
            ).run(stop)
            _lost(opened)
            out.print(f"worker {safe_text(member)}: stopped")
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
            concurrency=concurrency,
        )
        if sub_leader:
            timing = LeaseTiming(ttl=member_ttl)
            team_kinds.sub_leader(opened, config, chosen, timing=timing, planner=planner).run(stop)
        else:
            Follower(opened, config, chosen).run(stop)
        _lost(opened)
    out.print(f"worker {safe_text(member)}: stopped")


def _banner(member: str, team: str, url: str, executor: str, kind: str) -> None:
    out.print(
        f"worker {safe_text(member)} joining team {safe_text(team)}: store "
        f"{safe_text(redact_url(url))}, executor {safe_text(executor)}, mode {kind}",
        soft_wrap=True,
    )


def _say(line: str) -> None:
    out.print(safe_text(line), soft_wrap=True)


def _stopping(who: str, signame: str) -> None:
    err.print(
        f"{safe_text(who)}: {signame}: stopping after the current step (at most "
        f"{STOP_GRACE:g} s; a second signal stops it at once)…",
        soft_wrap=True,
    )


def _abandoned(who: str, why: str) -> None:
    err.print(
        f"{safe_text(who)}: {why}; what it still ran is abandoned and its claims lapse "
        "(the leader retries that work)",
        soft_wrap=True,
    )


def _lost(store: PatientStore) -> None:
    """A member that stopped because its store was lost says why, with exit status 4."""
    if store.lost is not None:
        raise lost_exit(store.lost)


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
