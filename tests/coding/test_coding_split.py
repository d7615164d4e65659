"""A task that fails every attempt is split once by the planner, when one is configured."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.models.scripted import ScriptedModel
from tenure.protocol import PlanTask
from tenure.roles.coding import CodingConfig, CodingLeader
from tenure.roles.coding.split import PlannerSplit
from tenure.roles.planning.planner import Planner

from .conftest import fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]
IMPORTS = f"{sys.executable} -c 'import m1'"
PARTS = {
    "tasks": [
        {
            "id": "a",
            "goal": "Make m1 importable with a value() stub.",
            "scope": ["m1.py"],
            "input": {"file": "m1.py"},
            "checks": [{"kind": "command", "run": IMPORTS}],
        },
        {
            "id": "b",
            "goal": "Make value() return 1.",
            "depends_on": ["a"],
            "scope": ["m1.py"],
            "input": {"file": "m1.py"},
            "checks": [{"kind": "command", "run": IMPORTS}],
        },
    ]
}


def status(repo: Path) -> dict[str, dict[str, Any]]:
    text = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/status.yml")
    return {row["id"]: row for row in yaml.safe_load(text)["tasks"]}


def test_the_planner_splits_an_exhausted_task_and_its_parts_finish_it(
    repo: Path, agent: Agent
) -> None:
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["lie"]},
            "t1.a": {"file": "m1.py", "modes": ["lie"]},  # importable already: passes
            "t1.b": {"file": "m1.py", "modes": ["fix"]},
            "t2": {"file": "m2.py", "modes": ["fix"]},
        }
    )
    model = ScriptedModel([PARTS, PARTS, PARTS])
    plan = make_plan([fix_task(1), fix_task(2, depends_on=["t1"])])
    splitter = PlannerSplit(Planner(model, allow={"commands"}), repo)  # parts carry commands
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", splitter=splitter)
    outcome = CodingLeader(config).run()
    assert outcome.done, outcome.reason
    rows = status(repo)
    assert rows["t1"]["state"] == "split" and "t1.a, t1.b" in rows["t1"]["reason"]
    assert rows["t1.a"]["split_of"] == "t1" and rows["t1.b"]["state"] == "merged"
    assert rows["t2"]["state"] == "merged"
    plan_md = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/plan.md")
    assert "split t1 into t1.a, t1.b" in plan_md
    task_b = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/tasks/t1.b.md")
    assert "m1.value() == 1" in task_b  # the parent's own check runs on the last part
    assert len(model.calls) == 1


def test_a_split_that_cannot_stand_in_goes_to_the_inbox(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["lie"]}})

    def bad_split(task: PlanTask, failures: list[str]) -> list[PlanTask]:
        assert len(failures) == 3 and failures[0].startswith("attempt 1:")
        return [
            PlanTask(id="t1.x", goal="escape", scope=["m2.py"], checks=[]),
            PlanTask(id="t1.y", goal="stay", scope=["m1.py"], checks=[]),
        ]

    plan = make_plan([fix_task(1)])
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", splitter=bad_split)
    outcome = CodingLeader(config).run()
    assert outcome.states == {"t1": "needs-operator"}
    inbox = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/inbox.md")
    assert "could not split" in inbox and "outside t1's scope" in inbox
