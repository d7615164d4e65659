"""`tenure gc` lists before it removes; `tenure replan` without a live leader."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader

from .conftest import FAKE_AGENT, fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]


def tenure(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args], capture_output=True, text=True, timeout=60
    )


def branches(repo: Path) -> list[str]:
    return sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/tenure/").split()


def test_gc_lists_then_removes_only_merged_work(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["outside", "fix"]}})
    plan = make_plan([fix_task(1)])
    assert CodingLeader(CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1")).run().done
    before = branches(repo)
    listed = tenure("gc", "--repo", str(repo))
    assert listed.returncode == 0, listed.stderr
    assert "would remove  tenure/r1/t1/2" in listed.stdout
    assert "keep          tenure/r1/t1/1" in listed.stdout and "not merged" in listed.stdout
    assert branches(repo) == before  # listing removes nothing
    removed = tenure("gc", "--repo", str(repo), "--yes")
    assert removed.returncode == 0, removed.stderr
    assert sorted(branches(repo)) == ["tenure/r1/integration", "tenure/r1/t1/1"]


def test_replan_cli_without_a_live_leader(repo: Path, agent: Agent, tmp_path: Path) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["lie"]}})
    plan = make_plan([fix_task(1)])
    CodingLeader(CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1")).run()
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({"tasks": [fix_task(2)]}))
    done = tenure("replan", str(new), "--repo", str(repo), "--run", "r1", "--reason", "only m2 now")
    assert done.returncode == 0, done.stderr
    assert "t2: added" in done.stdout and "replanned r1" in done.stdout
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"tasks": [fix_task(2), fix_task(3)]}))
    by_team = tenure("replan", str(both), "--repo", str(repo), "--team", "code/r1")
    assert by_team.returncode == 0 and "t3: added" in by_team.stdout, by_team.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tasks": [fix_task(2, scope=["../x"])]}))
    refused = tenure("replan", str(bad), "--repo", str(repo), "--run", "r1", "--reason", "x")
    assert refused.returncode == 1 and "scope[0]" in refused.stderr
    missing = tenure("replan", str(new), "--repo", str(repo), "--run", "nope", "--reason", "x")
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr


def test_code_exits_3_when_a_task_waits_for_the_operator(repo: Path, tmp_path: Path) -> None:
    """As `tenure run` and `tenure leader` do: a run whose task waits in the inbox."""
    cfg = tmp_path / "agent.json"
    cfg.write_text(json.dumps({"t1": {"file": "m1.py", "modes": ["lie"]}}))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"tasks": [fix_task(1, max_attempts=1)]}))
    spec = f"script:{sys.executable} {FAKE_AGENT} {cfg} {{task_file}} {{result_file}}"
    done = tenure("code", str(plan), "--repo", str(repo), "--agent", spec, "--run", "r3")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not done" in done.stderr and "Traceback" not in done.stderr
