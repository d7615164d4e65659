"""Models on the command line: ``tenure plan``, and the planning and preflight that
``tenure run`` and ``tenure leader`` share.

Every setting problem (no model, unknown provider, missing key, unreachable base
URL, a cost budget on an unpriced model) is one line saying what to set, printed
before any work starts.

What the model writes is data: ``--allow-model commands|executors`` is the operator's
explicit leave for its plans and splits to add command checks or executors
(``roles.planning.limits``); giving it, and every use of it, is a warning line.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, err, out, store_url
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.executors import Executor, resolve_executor
from tenure.executors.llm import LLMExecutor, price_of
from tenure.models import Model, check_reachable, model_spec, open_model
from tenure.protocol import ConfigError, Plan, load_plan, to_dict
from tenure.protocol.private import private_dir
from tenure.protocol.words import counted
from tenure.roles.features.split import Splitter
from tenure.roles.planning import Planner, allowance, artifacts_from
from tenure.roles.register.spend import Totals
from tenure.store import Store, open_store

GoalOption = Annotated[
    str | None,
    typer.Option("--goal", "-g", help="Plan this goal with the model (instead of a plan file)."),
]
ArtifactOption = Annotated[
    list[str] | None,
    typer.Option(
        "--artifact",
        "-a",
        help="A file, directory or URL the team can reach (repeatable); the plan may use only these.",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="PROVIDER:MODEL[@BASE_URL] for the planner and `llm` workers (default: TENURE_MODEL).",
        show_default=False,
    ),
]




class ModelAllow(StrEnum):
    commands = "commands"
    executors = "executors"


AllowOption = Annotated[
    list[ModelAllow] | None,
    typer.Option(
        "--allow-model",
        help="Let the plans and splits the model writes add `commands` (command checks the "
        "leader runs) or `executors` (a task's executor, a judge check's model); repeatable. "
        "Off by default; each use is logged.",
        show_default=False,
    ),
]


def warn(line: str) -> None:
    err.print(f"[yellow]warning:[/] {safe_text(line)}", soft_wrap=True)


def allowed(values: list[ModelAllow] | None) -> frozenset[str]:
    """The ``--allow-model`` values; given at all, they are said on stderr."""
    chosen = allowance(str(v) for v in values or [])
    if chosen:
        names = ", ".join(sorted(chosen))
        warn(
            f"--allow-model {names}: plans and splits the model writes may add {names}; "
            "each use is logged (planner.allowed)"
        )
    return chosen


def planner_for(model: Model, allow: Collection[str] = (), **kwargs: Any) -> Planner:
    """The planner the commands use: the operator's allowance, its uses said on stderr."""
    return Planner(model, allow=frozenset(allow), announce=warn, **kwargs)


def open_checked(flag: str | None) -> Model:
    """The model ``--model`` or ``TENURE_MODEL`` names, built and its server reached."""
    model = open_model(model_spec(flag))
    check_reachable(model)
    return model


def planned(
    goal: str,
    artifacts: list[str],
    model: Model,
    *,
    team: str,
    workdir: Path | None,
    store: Store | None = None,
    allow: Collection[str] = (),
) -> Plan:
    """A validated plan from the planner; its rejections go to the team's event log."""

    def record(kind: str, data: dict[str, Any]) -> None:
        if store is not None:
            store.append_event(team, kind, data)

    found = artifacts_from(artifacts, workdir)
    planner = planner_for(model, allow, on_event=record)
    out.print(f"planning with {model.provider}:{model.name} from {len(found)} artifact(s)...")
    plan = planner.plan(goal, found, team=team, workdir=workdir)
    spent = plan.planning_spend
    tokens = (spent.input_tokens + spent.output_tokens) if spent else 0
    calls = counted(planner.calls, "call")
    out.print(f"planned {counted(len(plan.tasks), 'task')} in {calls}, {counted(tokens, 'token')}")
    return plan


def resolve_plan(
    path: Path | None,
    goal: str | None,
    artifacts: list[str] | None,
    model_flag: str | None,
    *,
    team: str,
    workdir: Path | None,
    log_to: Callable[[], AbstractContextManager[Store]] | None = None,
    save_dir: Path | None = None,
    allow: Collection[str] = (),
) -> tuple[Plan | None, Splitter | None]:
    """The plan (from the file, or planned from ``goal``) and the splitter a model makes
    possible: with ``--goal`` or ``--model`` the leader may split a task once.

    ``log_to`` opens the store the planner's rejections are logged to; it is called only
    when there is planning to do, after every flag, the plan file and the model checked
    out, so a refusal leaves no store behind."""
    if path is not None and goal:
        raise ConfigError("give a PLAN file or --goal, not both")
    if artifacts and not goal:
        raise ConfigError("--artifact goes with --goal: it lists what the planner may use")
    model = open_checked(model_flag) if (goal or model_flag) else None
    plan = load_plan(path) if path is not None else None
    if goal and model is not None:
        artifacts_from(artifacts or [], workdir)  # a missing one is refused before the store
        with log_to() if log_to is not None else nullcontext() as store:
            plan = planned(
                goal, artifacts or [], model, team=team, workdir=workdir, store=store, allow=allow
            )
        if save_dir is not None:
            saved = save_dir / f"plan-{team.replace('/', '-')}.yaml"
            private_dir(saved.parent, tighten_existing=False)
            saved.write_text(yaml.safe_dump(to_dict(plan), sort_keys=False), encoding="utf-8")
            out.print(f"the plan is in {saved}")
    splitter = None
    if model is not None:
        listed = artifacts_from(artifacts, workdir) if artifacts else []
        splitter = Splitter(planner_for(model, allow), listed, workdir=workdir)
    return plan, splitter


def preflight(executor: Executor | str, plan: Plan | None = None, *, field: str = "--exec") -> None:
    """Refuse, before any work starts, an executor (or a plan's task executor) that names a
    model that cannot be used: unknown, no key, unreachable, or unpriced under a cost budget."""
    chosen = resolve_executor(executor, field=field) if isinstance(executor, str) else executor
    executors = [chosen]
    for index, task in enumerate(plan.tasks if plan else []):
        if task.executor:
            executors.append(resolve_executor(task.executor, field=f"tasks[{index}].executor"))
    wants_cost = plan is not None and (
        (plan.budget is not None and plan.budget.cost_usd is not None)
        or any(t.budget is not None and t.budget.cost_usd is not None for t in plan.tasks)
    )
    for each in executors:
        if not isinstance(each, LLMExecutor):
            continue
        check_reachable(each.model)
        if wants_cost and price_of(each.model) is None:
            raise ConfigError(
                f"a cost budget is set but the price table has no price for "
                f"{each.model.provider}:{each.model.name}: add it to a price file named by "
                "TENURE_PRICES (USD per million tokens), or drop the cost limit"
            )


@app.command("plan")
def plan_command(
    goal: Annotated[str, typer.Option("--goal", "-g", help="What the team should achieve.")],
    artifact: ArtifactOption = None,
    model: ModelOption = None,
    team: Annotated[
        str, typer.Option("--team", "-t", help="Team path of the plan.", callback=params.team)
    ] = "default",
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the plan (YAML).")
    ] = Path("plan.yaml"),
    workdir: Annotated[
        Path | None, typer.Option(help="Where the artifacts' relative paths start.")
    ] = None,
    store: StoreOption = None,
    allow_model: AllowOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ask the model for a plan of GOAL over the listed artifacts, validated, and write it.

    The plan is checked before it is written: a DAG, disjoint write scopes, and every
    task grounded in a listed artifact; a rejected plan goes back to the model with the
    reason. Review it, then `tenure run plan.yaml --exec llm`.

    Example: `tenure plan --goal "Price our vendors" --artifact vendors/ --model openai:gpt-4.1`
    """
    with jsonout.people_on_stderr(as_json):
        made = _plan(goal, artifact or [], model, team, workdir, store, allowed(allow_model))
    output.write_text(yaml.safe_dump(to_dict(made), sort_keys=False), encoding="utf-8")
    if as_json:
        spent = Totals()
        if made.planning_spend is not None:
            spent.add(made.planning_spend)
        tasks = [t.id for t in made.tasks]
        jsonout.emit("plan", file=str(output), team=made.team, tasks=tasks, spend=asdict(spent))
        return
    out.print(f"wrote {safe_text(output)}")


def _plan(
    goal: str,
    artifact: list[str],
    model: str | None,
    team: str,
    workdir: Path | None,
    store: str | None,
    allow: Collection[str],
) -> Plan:
    chosen = open_checked(model)
    if store is None:  # no store named: nothing to log to, and none is created
        return planned(goal, artifact, chosen, team=team, workdir=workdir, allow=allow)
    with open_store(store_url(store)) as opened:
        return planned(
            goal, artifact, chosen, team=team, workdir=workdir, store=opened, allow=allow
        )
