"""Bad input is refused with a message naming what to fix, before any worktree exists;
a killed run resumes from the files in git."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.protocol.codec import load_plan
from tenure.protocol.errors import ConfigError, ProtocolError, TenureError
from tenure.roles.coding import CodingConfig, CodingLeader

from .conftest import FAKE_AGENT, fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]


def worktree_count(repo: Path) -> int:
    return sh(repo, "worktree", "list").count("\n")


def leader(repo: Path, cli: AgentCLI, tasks: list[dict[str, Any]] | None = None) -> CodingLeader:
    plan = make_plan(tasks or [fix_task(1)])
    return CodingLeader(CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1"))


def test_not_a_git_repository(tmp_path: Path, agent: Agent) -> None:
    with pytest.raises(TenureError, match="is not a git repository; run `git init`"):
        leader(tmp_path, agent({}))


def test_dirty_working_tree_names_the_files(repo: Path, agent: Agent) -> None:
    (repo / "m1.py").write_text("dirty\n")
    (repo / "new.txt").write_text("untracked\n")
    with pytest.raises(
        TenureError, match=r"uncommitted changes \(.*m1.py.*new.txt.*commit or stash"
    ):
        leader(repo, agent({}))
    assert worktree_count(repo) == 1


def test_agent_cli_not_installed(repo: Path) -> None:
    cli = AgentCLI.from_spec("script:no-such-agent-cli {task_file}")
    with pytest.raises(ConfigError, match="'no-such-agent-cli' is not installed"):
        leader(repo, cli)
    with pytest.raises(ConfigError, match="--agent must be one of"):
        AgentCLI.from_spec("chatgpt")
    assert worktree_count(repo) == 1


def test_unsafe_task_id(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"tasks": [fix_task(1, id="../escape")]}))
    with pytest.raises(ProtocolError, match=r"tasks\[0\]\.id"):
        load_plan(plan)


@pytest.mark.parametrize("scope", ["../outside.py", "/etc/passwd", "a/../../x", ".git/config"])
def test_scope_outside_the_repository(repo: Path, agent: Agent, scope: str) -> None:
    with pytest.raises(ProtocolError, match=r"tasks\[0\]\.scope\[0\]"):
        leader(repo, agent({}), [fix_task(1, scope=[scope])])
    assert worktree_count(repo) == 1


def test_a_task_without_command_checks_is_refused(repo: Path, agent: Agent) -> None:
    with pytest.raises(ProtocolError, match="at least one command check"):
        leader(repo, agent({}), [{"id": "t1", "goal": "trust me", "scope": ["m1.py"]}])


def test_cli_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"tasks": [fix_task(1)]}))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenure",
            "code",
            str(plan),
            "--repo",
            str(tmp_path),
            "--agent",
            "script:true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "not a git repository" in proc.stderr and "Traceback" not in proc.stderr


def test_a_killed_run_resumes_from_git_even_without_its_scratch_space(
    repo: Path, tmp_path: Path, agent: Agent
) -> None:
    cfg = tmp_path / "agent.json"
    cfg.write_text(
        '{"t1": {"file": "m1.py", "modes": ["hang", "fix"]},'
        ' "t2": {"file": "m2.py", "modes": ["fix"]}}'
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"tasks": [fix_task(1), fix_task(2)]}))
    agent_spec = f"script:{sys.executable} {FAKE_AGENT} {cfg} {{task_file}} {{result_file}}"
    argv = [
        sys.executable,
        "-m",
        "tenure",
        "code",
        str(plan),
        "--repo",
        str(repo),
        "--agent",
        agent_spec,
        "--run",
        "r1",
        "--workers",
        "1",
        "--no-sandbox",  # the agent dies with its leader outside bubblewrap too
    ]
    proc = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        log = repo / ".tenure/attempts/r1/t1-1/agent.log"
        while not (log.exists() and "mode hang" in log.read_text()):
            assert time.monotonic() < deadline, "the first attempt never started"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the leader dies; its agent has its own session
        proc.wait()
    agent = int((log.parent / "agent.pid").read_text())
    deadline = time.monotonic() + 10
    while not _ended(agent):  # the parent-death signal: it does not edit on without a leader
        assert time.monotonic() < deadline, "the agent outlived its leader"
        time.sleep(0.05)
    # the dispatch was committed before the agent ran
    log_text = sh(repo, "log", "--format=%s", "tenure/r1/integration")
    assert "tenure: dispatch t1 attempt 1" in log_text
    # resume: the interrupted attempt's change is salvaged into its branch, a new one runs
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "return 1" in sh(repo, "show", "tenure/r1/t1/1:m1.py")
    status = yaml.safe_load(sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/status.yml"))
    rows = {r["id"]: r for r in status["tasks"]}
    assert rows["t1"]["state"] == "merged" and rows["t1"]["attempt"] == 2
    assert "interrupted" in rows["t1"]["history"][0]
    # lose the scratch space (worktrees, logs) entirely: the run is rebuilt from git
    sh(repo, "worktree", "remove", "--force", str(repo / ".tenure/worktrees/r1/integration"))
    again = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "t1                       merged" in again.stdout
    assert "resuming r1: its plan is its own plan.md" in again.stdout


def _ended(pid: int) -> bool:
    """Gone, or a zombie nobody collected yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def test_overlapping_scopes_of_concurrent_tasks_are_named() -> None:
    from tenure.roles.coding.leader import overlapping_scopes

    def task(tid: str, scope: list[str], deps: list[str] | None = None) -> dict[str, Any]:
        return fix_task(1, id=tid, scope=scope, depends_on=deps or [])

    plan = make_plan(
        [
            task("a", ["src/"]),
            task("b", ["src/x.py"]),
            task("c", ["docs/"]),
            task("d", ["src/y.py"], ["a", "b"]),
        ]
    )
    found = overlapping_scopes(plan)
    assert len(found) == 1 and found[0].startswith("a and b may both change src/ ~ src/x.py")
