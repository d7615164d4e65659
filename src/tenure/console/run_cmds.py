"""``tenure run``: a whole team on one machine, with live progress."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from tenure import observe
from tenure.console import jsonout, params
from tenure.console.app import (
    PassEnvOption,
    StoreOption,
    app,
    err,
    fail,
    pass_env,
    store_url,
)
from tenure.console.crew import NO_WORKER_LEFT, Crew
from tenure.console.exits import Exit
from tenure.console.jsonout import JsonOption
from tenure.console.keys_cmds import InsecureOption, KeysOption, keys_root, member_credentials
from tenure.console.member_store import confirmed, lost_exit, patient
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
from tenure.console.processes import Terminated, terminated_on_signals
from tenure.console.run_view import summary, watch
from tenure.console.safe import safe_text
from tenure.console.standing import FreshOption, lead_key, settle_standing
from tenure.coord import Credentials, LeaseTiming
from tenure.coord.credentials import init_team
from tenure.executors import SPEC_HELP, resolve_executor
from tenure.executors.process_group import kill_live_children
from tenure.models import ENV_MODEL
from tenure.protocol import Plan, PlanTask
from tenure.protocol.plan import SUBTEAM_CAPABILITY, plan_executors, team_tree
from tenure.protocol.secrets import redact_url
from tenure.roles import Leader, LeaderConfig, LocalTeam, enqueue_plan
from tenure.roles.features import Splitter
from tenure.roles.teams.leader import check_leader_plan
from tenure.roles.teams.queue_plan import check_queue_plan
from tenure.store import Store, open_store
from tenure.store.patient import PatientStore


class Mode(StrEnum):
    team = "team"
    local = "local"
    queue = "queue"


@app.command()
def run(
    plan: Annotated[
        Path | None,
        typer.Argument(metavar="PLAN", help="Plan file (plan.yaml or plan.md), or use --goal."),
    ] = None,
    store: StoreOption = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", "-w", help="Worker count (1 to 64).", callback=params.between(1, 64)
        ),
    ] = 2,
    concurrency: params.ConcurrencyOption = 1,
    mode: Annotated[
        Mode, typer.Option(help="team: processes; local: threads; queue: no leader.")
    ] = Mode.team,
    executor: Annotated[str, typer.Option("--exec", help=f"Executor: {SPEC_HELP}.")] = "noop",
    ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl",
            help=f"Lease TTL in seconds ({params.MIN_TTL:g} to {params.MAX_TTL:g}).",
            callback=params.ttl(),
        ),
    ] = 3.0,
    state_dir: Annotated[Path, typer.Option(help="Members' local state.")] = Path(".tenure"),
    workdir: Annotated[
        Path | None, typer.Option(help="Where tasks and command checks run.")
    ] = None,
    goal: GoalOption = None,
    artifact: ArtifactOption = None,
    model: ModelOption = None,
    team: Annotated[
        str,
        typer.Option("--team", "-t", help="Team path of a --goal plan.", callback=params.team),
    ] = "default",
    keys: KeysOption = None,
    insecure: InsecureOption = False,
    allow_model: AllowOption = None,
    pass_names: PassEnvOption = None,
    fresh: FreshOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run a plan with a leader and N workers on one machine, showing progress.

    In team and queue mode the members are processes that sign what they send: the
    keys they need are made in the key directory (default .tenure/keys) if missing.

    With `--goal` and `--artifact`, the model (`--model` or TENURE_MODEL) plans first;
    `--exec llm` makes the workers that model too. Exit status: 0 when every task is
    done, 3 when some wait in the inbox, 1 when the plan is refused or the run stops
    before it settles, 4 when the store was lost, 5 when a team has no worker left
    (every status: docs/operations.md). Workers' output is kept in STATE_DIR/logs; a
    store outage is waited out (TENURE_STORE_PATIENCE seconds, default 300). A plan
    its team finished already is not run again (`--fresh` starts it over); a changed
    plan is refused: change a team's plan with `tenure replan`.

    Example: `tenure run plan.yaml --workers 4 --exec "command:python3 agent.py"`

    Example: `tenure run plan.yaml --workers 2 --concurrency 16 --exec llm:openai:gpt-4.1`

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
    with jsonout.people_on_stderr(as_json):  # what planning says, too
        found, splitter = resolve_plan(
            plan,
            goal,
            artifact,
            model,
            team=team,
            workdir=workdir,
            log_to=partial(open_store, url),  # a store only when planning: its log
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
    # what its leader (or a queue worker) would refuse, before the store says "done"
    if mode is Mode.queue:
        check_queue_plan(loaded)
    else:
        check_leader_plan(loaded, splitter=splitter)
    signed = mode is not Mode.local and not insecure
    if signed:  # the keys first: a fresh start signs what it registers with them
        for each in team_tree(loaded):
            init_team(keys_root(keys), each.team)
    lead = lead_key(keys, loaded.team) if signed else None
    started = time.monotonic()
    stop = threading.Event()
    spawned = workers * (1 if mode is Mode.local else len(team_tree(loaded)))
    try:
        with (
            terminated_on_signals(partial(_stopping, spawned)),
            jsonout.people_on_stderr(as_json),
            open_store(url) as raw,
        ):
            if mode is not Mode.local and not raw.shared_across_processes:
                # each worker process would get a store of its own
                raise fail(
                    f"store {redact_url(url)}: worker processes cannot share it; use --mode local"
                )
            member = "run" if mode is Mode.queue else "leader"
            opened = patient(raw, team=loaded.team, member=member, stop=stop)
            if not settle_standing(opened, loaded, fresh=fresh, credentials=lead):
                raise typer.Exit(summary(opened, loaded, 0.0, as_json=True) if as_json else 0)
            if mode is Mode.local:
                local = LocalTeam(
                    opened,
                    loaded,
                    resolve_executor(executor),
                    workers=workers,
                    concurrency=concurrency,
                    timing=LeaseTiming(ttl=ttl),
                    state_dir=state_dir,
                    workdir=workdir,
                    splitter=splitter,
                )
                watch(opened, loaded, local.run, stop, live=not as_json)
            else:
                _run_processes(
                    opened,
                    url,
                    loaded,
                    _Members(
                        mode, workers, executor, ttl, state_dir, workdir, model, allow, concurrency
                    ),
                    stop,
                    splitter,
                    None if insecure else keys_root(keys),
                    live=not as_json,
                )
            if opened.lost is not None:
                raise lost_exit(opened.lost)
            confirmed(opened)  # a store replaced under the run: one line, no summary
            elapsed = time.monotonic() - started
            raise typer.Exit(summary(opened, loaded, elapsed, as_json=as_json))
    except Terminated as exc:  # its members were stopped on the way out
        err.print(f"tenure run: {exc}; every member it started was stopped")
        raise typer.Exit(128 + exc.signum) from None
    except KeyboardInterrupt:
        err.print("tenure run: stopped (Ctrl-C); every member it started was stopped")
        raise typer.Exit(Exit.INTERRUPTED) from None


def _stopping(workers: int, why: str) -> None:
    """Said when a signal stops the run; the processes this one runs (a local team's
    tasks, the leader's command checks) end now, so its threads can finish."""
    err.print(f"{why}: stopping {workers} worker(s)…")
    kill_live_children()


@dataclass(frozen=True)
class _Members:
    """What the member processes of a run are started with."""

    mode: Mode
    workers: int
    executor: str
    ttl: float
    state_dir: Path
    workdir: Path | None
    model: str | None
    allow: Collection[str]
    concurrency: int = 1


def _run_processes(
    store: PatientStore,
    url: str,
    plan: Plan,
    how: _Members,
    stop: threading.Event,
    splitter: Splitter | None = None,
    keys: Path | None = None,
    *,
    live: bool = True,
) -> None:
    """Start the workers (each its own process, owned by this one), then lead or wait."""
    if how.mode is Mode.queue:
        # a claim lasts as long as the message stays invisible: cover the longest task
        longest = max(t.deadline_seconds for t in plan.tasks)
        extra = ["--queue", "--visibility", f"{longest + 5:g}"]
    else:
        extra = []
    members = {
        each.team: [f"{_prefix(plan, each)}{n}" for n in range(1, how.workers + 1)]
        for each in team_tree(plan)  # a nested plan: workers for every team of the tree
    }
    credentials = _credentials(store, plan, members, keys)
    signing = ["--keys", str(keys)] if keys is not None else ["--insecure"]
    crew = Crew(how.state_dir, url, say=_say)
    try:
        for each in team_tree(plan):
            common = team_worker_args(
                each,
                how.executor,
                how.state_dir,
                how.workdir,
                model=how.model,
                allow=how.allow,
                concurrency=how.concurrency,
            )
            for member in members[each.team]:
                crew.start(
                    each.team, member, ["worker", *common, *signing, "--member", member, *extra]
                )
        if how.mode is Mode.queue:
            body: Callable[[threading.Event], object] = partial(_produce, store, plan, credentials)
        else:
            config = LeaderConfig(
                team=plan.team,
                member_id="leader",
                priority=100,
                timing=LeaseTiming(ttl=how.ttl),
                state_dir=how.state_dir,
                workdir=how.workdir,
                stale_grace=how.ttl,
                member_ttl=how.ttl,
                credentials=credentials,
            )
            body = Leader(store, config, plan, splitter=splitter).run
        check = partial(crew.check, partial(_live_ids, store))
        why = watch(store, plan, body, stop, check, live=live)
        if why is not None:
            confirmed(store)  # workers that found the store lost: the run says that instead
            raise fail(why, NO_WORKER_LEFT)
    finally:
        crew.stop_all()


def _live_ids(store: Store, team: str) -> set[str]:
    return {m.member_id for m in store.members(team)}


def _say(line: str) -> None:
    err.print(safe_text(line), soft_wrap=True)


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
    concurrency: int = 1,
) -> list[str]:
    """``tenure worker`` options for one team of a (possibly nested) plan; sub-leaders
    get the ``model`` that plans goal-only nested teams (else they read TENURE_MODEL)
    and the operator's ``--allow-model`` for what that model writes. Workers get
    ``--concurrency``; sub-leaders do not (each leads one nested team at a time).
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
    elif concurrency > 1:
        args += ["--concurrency", str(concurrency)]
    return args


def _produce(
    store: Store, plan: Plan, credentials: Credentials | None, stop: threading.Event
) -> str:
    """A queue run: its tasks enqueued, then waited for; traced as one run, which each
    envelope carries to the worker that takes it."""
    with observe.run(plan.team, mode="queue") as span:
        enqueue_plan(store, plan, credentials=credentials)
        outcome = _wait_settled(store, plan, stop)
        span.set("tenure.outcome", outcome)
    return outcome


def _wait_settled(store: Store, plan: Plan, stop: threading.Event) -> str:
    while not stop.is_set():
        if all(t.state not in ("queued", "running", "review") for t in store.tasks(plan.team)):
            return "settled"
        stop.wait(0.05)
    return "stopped"
