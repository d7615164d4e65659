"""``tenure code`` says each task's steps while its run goes (dispatched, agent running
and still running, checks, rejected, accepted, merged), and ``--json`` prints the
outcome as one document with the steps on stderr; a real repository, the fake agent
CLI, the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import FAKE_AGENT, fix_task


def test_code_says_each_step_of_each_task_and_json_holds_the_outcome(
    repo: Path, tmp_path: Path
) -> None:
    cfg = tmp_path / "agent.json"
    cfg.write_text(json.dumps({"t1": {"file": "m1.py", "modes": ["lie", "sleep"], "seconds": 1}}))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"tasks": [fix_task(1)]}))
    spec = f"script:{sys.executable} {FAKE_AGENT} {cfg} {{task_file}} {{result_file}}"
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "code", str(plan), "--repo", str(repo)]
        + ["--agent", spec, "--run", "p1", "--workers", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TENURE_PROGRESS_SECONDS": "0.3", "COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["version"], shown["command"], shown["run"]) == (1, "code", "p1")
    assert shown["done"] is True and shown["states"] == {"t1": "merged"}
    assert shown["integration_branch"] == "tenure/p1/integration"
    assert shown["outcome"] == "done"
    assert shown["counts"] == {"done": 1, "blocked": 0, "failed": 0, "cancelled": 0, "open": 0}
    assert shown["tasks"]["t1"]["state"] == "done" and shown["tasks"]["t1"]["attempts"] == 2
    steps = [line for line in done.stderr.splitlines() if line.startswith("t1: ")]
    expected = [
        "t1: dispatched attempt 1 to worker-1 (tenure/p1/t1/1)",
        "t1: agent running",
        "t1: rejected (attempt 1): command check failed",
        "t1: dispatched attempt 2 to worker-1 (tenure/p1/t1/2)",
        "t1: agent running for ",
        "t1: agent finished after ",
        "t1: accepted (attempt 2); merging",
        "t1: merged (tenure/p1/t1/2)",
    ]
    at = 0
    for line in steps:  # each expected step, in this order
        if at < len(expected) and line.startswith(expected[at]):
            at += 1
    assert at == len(expected), steps
    assert "checks running" in done.stderr
