"""`tenure discard` lists a run's failed attempts and deletes them only with --yes; it never
touches the integration branch, a running attempt, or accepted work waiting to merge."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome

from .conftest import fix_task, make_plan, sh
from .test_coding_answer import tenure, wait_for

Agent = Callable[[dict[str, Any]], AgentCLI]


def branches(repo: Path) -> list[str]:
    return sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/tenure/").split()


def states(repo: Path) -> dict[str, str]:
    show = ["git", "show", "tenure/r1/integration:.tenure/runs/r1/status.yml"]
    text = subprocess.run(show, cwd=repo, capture_output=True, text=True).stdout
    return {r["id"]: r["state"] for r in (yaml.safe_load(text) or {}).get("tasks", [])}


def test_discard_lists_then_removes_only_failed_attempts(
    repo: Path, agent: Agent, tmp_path: Path
) -> None:
    gate = tmp_path / "let-t3-finish"
    cli = agent(
        {
            "t3": {"file": "m3.py", "modes": ["waitfor"], "path": str(gate)},
            "t1": {"file": "m1.py", "modes": ["outside", "fix"]},
            "t2": {"file": "m2.py", "modes": ["fix"]},
        }
    )
    plan = make_plan([fix_task(3), fix_task(1), fix_task(2)])  # t3 merges first
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", workers=3)
    box: list[CodingOutcome] = []
    thread = threading.Thread(target=lambda: box.append(CodingLeader(config).run()), daemon=True)
    thread.start()
    try:
        want = {"t3": "running", "t1": "accepted", "t2": "accepted"}
        wait_for(lambda: states(repo) == want, "the run never reached the expected states")
        before = branches(repo)
        listed = tenure("discard", "--run", "r1", "--repo", str(repo))
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert any(
            line.startswith("would discard  tenure/r1/t1/1") and "outside the task's scope" in line
            for line in lines
        ), listed.stdout
        for branch, why in (("t1/2", "accepted"), ("t2/1", "accepted"), ("t3/1", "running")):
            assert any(
                line.startswith(f"keep           tenure/r1/{branch} ") and f"): {why}" in line
                for line in lines
            ), listed.stdout
        assert "integration" not in listed.stdout and "--yes" in listed.stdout
        assert branches(repo) == before  # listing removes nothing
        only_t2 = tenure("discard", "--run", "r1", "--task", "t2", "--repo", str(repo), "--yes")
        assert only_t2.returncode == 0 and "discarded 0 attempt(s)" in only_t2.stdout
        removed = tenure("discard", "--run", "r1", "--repo", str(repo), "--yes")
        assert removed.returncode == 0, removed.stderr
        assert sorted(set(before) - set(branches(repo))) == ["tenure/r1/t1/1"]
        assert not (repo / ".tenure/worktrees/r1/t1-1").exists()
        assert (repo / ".tenure/worktrees/r1/t1-2").is_dir()
    finally:
        gate.write_text("go\n")
        thread.join(timeout=120)
    assert box and box[0].done, box  # the running leader never noticed
    missing = tenure("discard", "--run", "r1", "--task", "nope", "--repo", str(repo))
    assert missing.returncode == 1 and "has no task 'nope'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    no_run = tenure("discard", "--run", "r9", "--repo", str(repo))
    assert no_run.returncode == 1 and "no run 'r9'" in no_run.stderr
