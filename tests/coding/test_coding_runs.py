"""Coding teams on real git repositories with a fake agent CLI (tests/coding/fake_agent.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.executors.worktrees import plan_cleanup, remove
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome

from .conftest import fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]


def run(repo: Path, plan_tasks: list[dict[str, Any]], cli: AgentCLI, **kw: Any) -> CodingOutcome:
    config = CodingConfig(repo=repo, plan=make_plan(plan_tasks), agent=cli, run_id="r1", **kw)
    return CodingLeader(config).run()


def at(repo: Path, ref: str, path: str) -> str:
    return sh(repo, "show", f"{ref}:{path}")


def status(repo: Path) -> dict[str, dict[str, Any]]:
    text = at(repo, "tenure/r1/integration", ".tenure/runs/r1/status.yml")
    return {row["id"]: row for row in yaml.safe_load(text)["tasks"]}


def reachable(repo: Path, branch: str, text: str) -> bool:
    return text in sh(repo, "log", "--format=%s", branch)


def test_parallel_fixes_merge_in_plan_order_and_pass_together(repo: Path, agent: Agent) -> None:
    cli = agent({f"t{i}": {"file": f"m{i}.py", "modes": ["fix"]} for i in (1, 2, 3)})
    outcome = run(repo, [fix_task(1), fix_task(2), fix_task(3)], cli, workers=2)
    assert outcome.done, outcome.reason
    assert all(v.passed for v in outcome.final_checks) and len(outcome.final_checks) == 3
    integ = "tenure/r1/integration"
    for i in (1, 2, 3):
        assert "return 1" in at(repo, integ, f"m{i}.py")
    rows = status(repo)
    assert {r["state"] for r in rows.values()} == {"merged"}
    assert rows["t1"]["branch"] == "tenure/r1/t1/1" and rows["t1"]["worker"].startswith("worker-")
    log = sh(repo, "log", "--format=%s", integ)
    merges = [line for line in log.splitlines() if line.startswith("tenure: merge")]
    assert [m.split()[2] for m in reversed(merges)] == ["t1", "t2", "t3"]  # plan order
    assert "tenure: dispatch t1 attempt 1" in log and "t2 attempt 1 accepted" in log
    task_md = at(repo, integ, ".tenure/runs/r1/tasks/t1.md")
    assert "## Scope" in task_md and "`m1.py`" in task_md and "Questions and answers" in task_md
    result_md = at(repo, integ, ".tenure/runs/r1/results/t1.md")
    assert "ran the checks" in result_md and "passed" in result_md
    assert "Changelog" in at(repo, integ, ".tenure/runs/r1/plan.md")
    tracked = sh(repo, "ls-tree", "-r", "--name-only", integ).split()
    assert not [p for p in tracked if "__pycache__" in p or p.startswith(".tenure/result")]
    # the user's checkout is untouched and clean
    assert sh(repo, "status", "--porcelain") == ""
    assert "return 0" in (repo / "m1.py").read_text()
    # each attempt had its own ports and database, and a log
    logs = sorted((repo / ".tenure/attempts/r1").glob("*/agent.log"))
    assert len(logs) == 3
    texts = [p.read_text() for p in logs]
    assert all("fake agent" in t for t in texts)


def test_lying_agent_is_caught_and_retried_in_a_fresh_worktree(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["lie", "fix"]}})
    outcome = run(repo, [fix_task(1)], cli)
    assert outcome.done
    rows = status(repo)
    assert rows["t1"]["attempt"] == 2 and rows["t1"]["state"] == "merged"
    task_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/tasks/t1.md")
    assert "### Attempt 1 failed" in task_md and "assert" in task_md
    assert task_md.index("Attempt 1 failed") < task_md.index("Questions and answers")
    # the failed attempt's worktree and branch are kept for autopsy
    assert (repo / ".tenure/worktrees/r1/t1-1").is_dir()
    assert sh(repo, "branch", "--list", "tenure/r1/t1/1").strip()


def test_third_failure_goes_to_the_operator_and_blocks_dependents(repo: Path, agent: Agent) -> None:
    cli = agent(
        {"t1": {"file": "m1.py", "modes": ["lie"]}, "t2": {"file": "m2.py", "modes": ["fix"]}}
    )
    outcome = run(repo, [fix_task(1), fix_task(2, depends_on=["t1"])], cli)
    assert not outcome.done
    assert outcome.states == {"t1": "needs-operator", "t2": "blocked"}
    result = outcome.result  # the register's view, as Team.run() gives it
    assert (result.outcome, result.blocked, result.open, result.done) == ("blocked", 1, 1, 0)
    assert result.tasks["t1"].attempts == 3 and "3 attempts failed" in result.tasks["t1"].reason
    inbox = at(repo, "tenure/r1/integration", ".tenure/runs/r1/inbox.md")
    assert "t1" in inbox and "3 attempts failed" in inbox
    for n in (1, 2, 3):
        assert sh(repo, "branch", "--list", f"tenure/r1/t1/{n}").strip()
    assert not sh(repo, "branch", "--list", "tenure/r1/t2/1").strip()  # never dispatched


def test_change_outside_scope_is_rejected_naming_the_files(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["outside", "fix"]}})
    outcome = run(repo, [fix_task(1)], cli)
    assert outcome.done
    task_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/tasks/t1.md")
    assert "outside the task's scope" in task_md and "README.txt" in task_md
    assert at(repo, "tenure/r1/integration", "README.txt") == "a small repository\n"
    assert "README.txt" in sh(repo, "show", "--stat", "tenure/r1/t1/1")  # kept, not merged


def test_merge_conflict_redispatches_the_later_task_on_the_integration_branch(
    repo: Path, agent: Agent
) -> None:
    cli = agent(
        {
            "a": {"modes": ["conflict"]},
            "b": {"modes": ["conflict", "append"]},
        }
    )
    check = {"kind": "command", "run": "python3 -c 'import shared'"}
    tasks = [
        {"id": "a", "goal": "own shared", "scope": ["shared.py"], "checks": [check]},
        {"id": "b", "goal": "own shared too", "scope": ["shared.py"], "checks": [check]},
    ]
    outcome = run(repo, tasks, cli, workers=2)
    assert outcome.done, outcome.reason
    shared = at(repo, "tenure/r1/integration", "shared.py")
    assert "OWNER = 'a'" in shared and "ALSO_B = True" in shared  # no side silently picked
    task_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/tasks/b.md")
    assert "conflicts in: shared.py" in task_md
    plan_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/plan.md")
    assert "warning: a and b may both change shared.py" in plan_md
    assert status(repo)["b"]["attempt"] == 2
    assert reachable(repo, "tenure/r1/b/1", "tenure: b attempt 1")  # the losing side is kept


def test_hanging_agent_is_killed_at_its_deadline_and_its_work_kept(
    repo: Path, agent: Agent
) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["hang", "fix"]}})
    cli.grace_seconds = 0.2
    outcome = run(repo, [fix_task(1, deadline_seconds=1.0)], cli)
    assert outcome.done
    task_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/tasks/t1.md")
    assert "deadline of 1s" in task_md
    assert "return 1" in at(repo, "tenure/r1/t1/1", "m1.py")  # committed by the worker
    assert "process group killed" in (repo / ".tenure/attempts/r1/t1-1/agent.log").read_text()


def test_agent_that_dies_mid_run_leaves_its_half_change_committed(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["die", "fix"]}})
    outcome = run(repo, [fix_task(1)], cli)
    assert outcome.done
    assert "half done" in at(repo, "tenure/r1/t1/1", "m1.py")
    task_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/tasks/t1.md")
    # unsandboxed: the signal itself; in bubblewrap: its exit status 128 + 9, named
    assert re.search(r"exited with status (-9|137 \(in the sandbox: killed by signal 9\))", task_md)


def test_gc_lists_first_and_never_removes_unmerged_work(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["outside", "fix"]}})
    assert run(repo, [fix_task(1)], cli).done
    items = {i.branch: i for i in plan_cleanup(repo)}
    assert items["tenure/r1/t1/2"].removable  # merged into the integration branch
    assert not items["tenure/r1/t1/1"].removable  # rejected commits: unmerged, kept
    assert not items["tenure/r1/integration"].removable  # not merged into main yet
    with pytest.raises(Exception, match="not merged"):
        remove(repo, items["tenure/r1/t1/1"])
    sh(repo, "merge", "-q", "--no-edit", "tenure/r1/integration")
    items = {i.branch: i for i in plan_cleanup(repo)}
    for item in sorted(items.values(), key=lambda i: i.branch.endswith("/integration")):
        if item.removable:
            remove(repo, item)
    left = sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/tenure/").split()
    assert left == ["tenure/r1/t1/1"]
    assert (repo / ".tenure/worktrees/r1/t1-1").is_dir()
    assert not (repo / ".tenure/worktrees/r1/t1-2").exists()


def test_nothing_is_lost_in_a_chaotic_run(repo: Path, agent: Agent) -> None:
    """Every commit of every attempt stays reachable from a branch."""
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["lie", "fix"]},
            "t2": {"file": "m2.py", "modes": ["outside", "fix"]},
            "t3": {"file": "m3.py", "modes": ["die", "fix"]},
            "t4": {"file": "m4.py", "modes": ["hang", "fix"]},
            "a": {"modes": ["conflict"]},
            "b": {"modes": ["conflict", "append"]},
        }
    )
    cli.grace_seconds = 0.2
    check = {"kind": "command", "run": "python3 -c 'import shared'"}
    tasks = [
        fix_task(1),
        fix_task(2),
        fix_task(3),
        fix_task(4, deadline_seconds=1.0),
        {"id": "a", "goal": "own shared", "scope": ["shared.py"], "checks": [check]},
        {"id": "b", "goal": "own shared too", "scope": ["shared.py"], "checks": [check]},
    ]
    outcome = run(repo, tasks, cli, workers=3)
    assert outcome.done, outcome.reason
    subjects = sh(repo, "log", "--all", "--format=%s").splitlines()
    for made in ("t2 attempt 1", "t3 attempt 1", "t4 attempt 1", "b attempt 1"):
        assert f"tenure: {made} (script)" in subjects  # the worker's commit of each attempt
    unreachable = sh(repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress")
    assert "unreachable commit" not in unreachable, unreachable
    for task_id, n in (("t1", 1), ("t2", 1), ("t3", 1), ("t4", 1), ("b", 1)):
        assert sh(repo, "branch", "--list", f"tenure/r1/{task_id}/{n}").strip()


def test_an_agent_that_commits_itself_or_switches_branch(repo: Path, agent: Agent) -> None:
    """Unsandboxed: in bubblewrap an agent cannot commit (.git is read-only to it; see
    tests/coding/test_coding_containment.py)."""
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["selfcommit"]},
            "t2": {"file": "m2.py", "modes": ["switch", "fix"]},
        }
    )
    cli.sandbox = "off"
    outcome = run(repo, [fix_task(1), fix_task(2)], cli)
    assert outcome.done, outcome.reason
    assert "agent's own commit" in sh(repo, "log", "--format=%s", "tenure/r1/integration")
    task_md = at(repo, "tenure/r1/integration", ".tenure/runs/r1/tasks/t2.md")
    # a branch of its own is a change to the user's refs: kept aside, the attempt rejected
    assert "added refs/heads/elsewhere-t2" in task_md
    assert not sh(repo, "branch", "--list", "elsewhere-t2").strip()
    kept = "refs/tenure-quarantine/heads/elsewhere-t2"
    # the worker commits what it left on the attempt's branch, never on the one it made
    assert "return 1" in at(repo, "tenure/r1/t2/1", "m2.py")
    assert "return 0" in at(repo, kept, "m2.py")
