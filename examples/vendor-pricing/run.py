"""Price five vendors with a team of LLMs: an LLM leader plans, LLM workers extract.

    python examples/vendor-pricing/run.py                 # scripted models, offline
    TENURE_MODEL=openai:gpt-4.1 python examples/vendor-pricing/run.py
    TENURE_MODEL=openai:qwen2.5@http://localhost:8000/v1 python examples/vendor-pricing/run.py

The leader's planner turns the goal and the vendor pages into a plan (validated:
a DAG, disjoint write scopes, every task grounded in a listed page), LLM workers
do the tasks, the leader verifies each result (sources and freshness, the
output schema, and check.py run by the leader itself) and retries with the
failure in the envelope. ``--fixed-plan`` skips planning and runs plan.yaml, the
plan the scripted planner produces. Exit status 0 only when check.py passes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from rich.console import Console

from tenure.console.state_cmds import team_table
from tenure.coord import LeaseTiming
from tenure.executors.llm import LLMExecutor
from tenure.models import ENV_MODEL, Model, ScriptedModel, check_reachable, open_model
from tenure.protocol import TenureError, load_plan
from tenure.roles.features.split import Splitter
from tenure.roles.planning.planner import Planner, artifacts_from
from tenure.roles.teams.local import LocalTeam
from tenure.store import open_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import brain  # noqa: E402  (the example's scripted models, next to this file)

GOAL = (
    "Price every vendor from its pricing page into pricing.json, one row per vendor "
    "(vendor, plan, monthly_usd, currency), every number sourced."
)
TEAM = "vendor-pricing"
console = Console(highlight=False, width=110)


def choose_model() -> Model:
    if os.environ.get(ENV_MODEL):
        model = open_model()  # one clear line if a setting is wrong
        check_reachable(model)
        return model
    return ScriptedModel(brain.respond, name="vendor-pricing-brain")


def prepare(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(HERE / "vendors", workdir / "vendors", dirs_exist_ok=True)
    for name in ("plan.yaml", "check.py"):
        shutil.copy(HERE / name, workdir / name)
    (workdir / "pricing.json").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="where the run happens (default: a temp dir)")
    parser.add_argument("--fixed-plan", action="store_true", help="run plan.yaml, no planning")
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="vendor-pricing-"))).resolve()
    prepare(workdir)
    try:
        model = choose_model()
        artifacts = artifacts_from(["vendors/"], workdir)
        planner = Planner(model)
        if args.fixed_plan:
            plan = load_plan(workdir / "plan.yaml")
        else:
            plan = planner.plan(GOAL, artifacts, team=TEAM)
    except TenureError as exc:
        console.print(f"[bold red]error:[/] {exc}", markup=True, soft_wrap=True)
        return 1
    console.print(f"model: {model.provider}:{model.name}; {len(plan.tasks)} tasks; in {workdir}")
    with open_store(f"sqlite:///{workdir / '.tenure' / 'state.db'}") as store:
        team = LocalTeam(
            store,
            plan,
            LLMExecutor(model),
            workers=args.workers,
            timing=LeaseTiming(ttl=10.0),
            state_dir=workdir / ".tenure",
            workdir=workdir,
            splitter=Splitter(planner, artifacts, workdir=workdir),
        )
        stop = threading.Event()
        outcome = team.run(stop)
        console.print(team_table(store, TEAM))  # its caption has the team's spend
        tasks = store.tasks(TEAM)
    check = subprocess.run(
        [sys.executable, "check.py"], cwd=workdir, capture_output=True, text=True
    )
    console.print((check.stdout or check.stderr).strip(), markup=False)
    done = all(t.state == "done" for t in tasks)
    return 0 if outcome == "finished" and done and check.returncode == 0 else 3


if __name__ == "__main__":
    sys.exit(main())
