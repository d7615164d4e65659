"""Coding runs are teams on the standard runtime: their verdicts are in the decision
log, every check kind of the ladder applies to an attempt (not only commands), a
leader hook of the caller's own sees the run, and `tenure status` shows the register."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.protocol import TaskResult
from tenure.roles.coding import CodingConfig, CodingLeader
from tenure.roles.leader import LeaderContext, LeaderHook
from tenure.roles.register import Task
from tenure.store import open_store
from tenure.verify import Verdict

from .conftest import fix_task, make_plan, sh
from .test_coding_answer import tenure

Agent = Callable[[dict[str, Any]], AgentCLI]
REPORTED = {  # the agent's report must say how it verified its change
    "kind": "schema",
    "schema": {
        "type": "object",
        "required": ["report"],
        "properties": {"report": {"type": "string", "pattern": "## Verification"}},
    },
}


def rows(repo: Path) -> dict[str, dict[str, Any]]:
    text = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/status.yml")
    return {r["id"]: r for r in yaml.safe_load(text)["tasks"]}


def test_a_schema_check_on_the_report_rejects_an_attempt_and_the_verdicts_are_logged(
    repo: Path, agent: Agent, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    cli = agent({"t1": {"file": "m1.py", "modes": ["quiet", "fix"]}})
    task = fix_task(1)
    task["checks"] = [REPORTED, *task["checks"]]
    config = CodingConfig(repo=repo, plan=make_plan([task]), agent=cli, run_id="r1", store_url=url)
    outcome = CodingLeader(config).run()
    assert outcome.done, outcome.reason
    row = rows(repo)["t1"]
    assert row["state"] == "merged" and row["attempt"] == 2  # the quiet report was rejected
    assert "schema check failed" in row["history"][0]
    with open_store(url) as store:
        verdicts = [e.data for e in store.events("code/r1") if e.kind == "verify.verdict"]
    first = [v for v in verdicts if v["key"] == "t1:attempt-1"]
    assert [(v["check"], v["passed"]) for v in first] == [
        ("containment", True),
        ("branch", True),
        ("scope", True),
        ("links", True),
        ("schema", False),
    ]
    second = {v["check"]: v["passed"] for v in verdicts if v["key"] == "t1:attempt-2"}
    assert second == {
        "containment": True,
        "branch": True,
        "scope": True,
        "links": True,
        "schema": True,
        "command": True,
    }
    shown = tenure("decisions", "--store", url, "--team", "code/r1")
    assert shown.returncode == 0, shown.stderr
    assert "schema" in shown.stdout and "command" in shown.stdout and "t1" in shown.stdout
    status = tenure("status", "--store", url, "--team", "code/r1")
    assert status.returncode == 0 and "t1" in status.stdout and "done" in status.stdout


class Seen(LeaderHook):
    name: ClassVar[str] = "seen"

    def __init__(self) -> None:
        self.points: list[str] = []

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> None:
        self.points.append(f"review {task.task_id} {task.attempt}")

    def on_accept(self, ctx: LeaderContext, task: Task, verdicts: list[Verdict]) -> bool:
        self.points.append(f"accept {task.task_id}")
        return False  # the coding hook (before this one) already took it

    def on_settled(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        self.points.append("settled")
        return False


def test_a_hook_of_the_callers_own_sees_the_coding_run(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["lie", "fix"]}})
    hook = Seen()
    config = CodingConfig(
        repo=repo, plan=make_plan([fix_task(1)]), agent=cli, run_id="r1", hooks=[hook]
    )
    assert CodingLeader(config).run().done
    assert hook.points[:2] == ["review t1 1", "review t1 2"]
    assert "settled" in hook.points and "accept t1" not in hook.points
