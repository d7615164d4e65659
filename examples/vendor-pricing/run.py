"""Price five vendors with a team of LLMs: an LLM leader plans, LLM workers extract.

    python examples/vendor-pricing/run.py                 # scripted models, offline
    TENURE_MODEL=openai:gpt-4.1 python examples/vendor-pricing/run.py
    TENURE_MODEL=openai:qwen2.5@http://localhost:8000/v1 python examples/vendor-pricing/run.py

The leader's planner turns the goal and the vendor pages into a plan (validated:
a DAG, disjoint write scopes, every task grounded in a listed page), LLM workers
do the tasks, the leader verifies each result (sources and freshness, the
output schema, and check.py run by the leader itself: a command check the planner
may write because run.py allows it) and retries with the failure in the envelope. ``--fixed-plan`` skips planning and runs plan.yaml, the
plan the scripted planner produces. Exit status 0 only when check.py passes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _use_the_projects_venv() -> None:
    """Run under the checkout's .venv when this Python lacks tenure (or what it needs), so
    `python examples/.../run.py` works right after ./scripts/demo or ./scripts/test."""
    try:
        import tenure  # noqa: F401
    except ModuleNotFoundError as missing:
        venv = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
        if venv.exists() and Path(sys.prefix).resolve() != venv.parent.parent.resolve():
            os.execv(venv, [str(venv), *sys.argv])
        sys.exit(
            f"{missing}: install tenure first (./scripts/demo creates .venv; "
            "then . .venv/bin/activate, or pip install -e .)"
        )


_use_the_projects_venv()

import tenure  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import brain  # noqa: E402  (the example's scripted models, next to this file)

GOAL = (
    "Price every vendor from its pricing page into pricing.json, one row per vendor "
    "(vendor, plan, monthly_usd, currency), every number sourced."
)
TEAM = "vendor-pricing"


def choose_model() -> tenure.Model:
    if os.environ.get("TENURE_MODEL"):
        return tenure.open_model()  # one clear line if a setting is wrong
    return tenure.ScriptedModel(brain.respond, name="vendor-pricing-brain")


def prepare(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(HERE / "vendors", workdir / "vendors", dirs_exist_ok=True)
    for name in ("plan.yaml", "check.py"):
        shutil.copy(HERE / name, workdir / name)
    # a new run each time, also in a directory an earlier run used
    (workdir / "pricing.json").unlink(missing_ok=True)
    shutil.rmtree(workdir / ".tenure", ignore_errors=True)


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
        artifacts = tenure.artifacts_from(["vendors/"], workdir)
        # the plan's ground truth is a command the leader runs (check.py): a model may
        # write one only because we allow it here; each one is logged (planner.allowed)
        planner = tenure.Planner(model, allow={"commands"})
        if args.fixed_plan:
            plan = tenure.load_plan(workdir / "plan.yaml")
        else:
            plan = planner.plan(GOAL, artifacts, team=TEAM)
        print(f"model: {model.provider}:{model.name}; {len(plan.tasks)} tasks; in {workdir}")
        team = tenure.Team(
            plan,
            executor=tenure.LLMExecutor(model),
            store=f"sqlite:///{workdir / '.tenure' / 'state.db'}",
            workers=args.workers,
            workdir=workdir,
            ttl=10.0,
            splitter=tenure.Splitter(planner, artifacts, workdir=workdir),
        )
        result = team.run()
    except tenure.TenureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    summary(result)
    check = subprocess.run(
        [sys.executable, "check.py"], cwd=workdir, capture_output=True, text=True
    )
    print((check.stdout or check.stderr).strip())
    return 0 if result.ok and check.returncode == 0 else 3


def summary(result: tenure.RunResult) -> None:
    """One line per task, then what the team's models spent."""
    for task_id, task in result.tasks.items():
        spent = f"{task.spend.tokens} tokens"
        print(
            f"  {task_id:<16} {task.state:<8} {task.attempts} attempt(s)  {spent:<12}  {task.reason[:50]}"
        )
    spend = result.spend
    print(f"spend: {spend.tokens} tokens, ${spend.cost_usd:.4f} in {spend.calls} call(s)")
    print(result)


if __name__ == "__main__":
    sys.exit(main())
