"""Goal shift: `tenure replan` freezes dispatch, logs the change, re-derives unstarted
tasks, and lets running ones finish or cancels them with the reason."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome
from tenure.roles.coding.replan import ReplanRequest, live_leader
from tenure.store import open_store

from .conftest import fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]


def status(repo: Path) -> dict[str, dict[str, Any]]:
    text = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/status.yml")
    return {row["id"]: row for row in yaml.safe_load(text)["tasks"]}


def plan_md(repo: Path) -> str:
    return sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/plan.md")


def leader(repo: Path, tasks: list[dict[str, Any]], cli: AgentCLI, **kw: Any) -> CodingLeader:
    return CodingLeader(
        CodingConfig(repo=repo, plan=make_plan(tasks), agent=cli, run_id="r1", **kw)
    )


def in_thread(lead: CodingLeader) -> tuple[threading.Thread, list[CodingOutcome]]:
    box: list[CodingOutcome] = []
    thread = threading.Thread(target=lambda: box.append(lead.run()), daemon=True)
    thread.start()
    return thread, box


def wait_for(predicate: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_offline_replan_rederives_stuck_and_unstarted_tasks(repo: Path, agent: Agent) -> None:
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["lie", "lie", "lie", "fix"]},
            "t2": {"file": "m2.py", "modes": ["fix"]},
            "t3": {"file": "m3.py", "modes": ["fix"]},
        }
    )
    first = leader(repo, [fix_task(1), fix_task(2, depends_on=["t1"])], cli).run()
    assert first.states == {"t1": "needs-operator", "t2": "blocked"}
    # the operator shifts the goal: t1 again (with a hint), t3 instead of t2
    new = make_plan([fix_task(1, goal="make m1.value() return 1 -- really"), fix_task(3)])
    notes = leader(repo, [fix_task(1)], cli).replan(ReplanRequest(new, False, "drop t2, add t3"))
    assert "t2: dropped" in notes and "t3: added" in notes
    assert any(n.startswith("t1: re-derived from needs-operator") for n in notes)
    text = plan_md(repo)
    assert "replan (let running finish): drop t2, add t3" in text and "run started" in text
    task_md = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/tasks/t1.md")
    assert "### Replanned" in task_md and "really" in task_md
    # resuming continues with the re-derived plan (from plan.md, not the argument)
    outcome = leader(repo, [fix_task(1)], cli).run()
    assert outcome.done, outcome.reason
    rows = status(repo)
    assert rows["t1"]["state"] == "merged" and rows["t1"]["attempt"] == 4  # branches unique
    assert rows["t2"]["state"] == "dropped" and rows["t3"]["state"] == "merged"


def test_live_replan_cancels_running_attempts_with_the_reason(repo: Path, agent: Agent) -> None:
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["hang"]},
            "t2": {"file": "m2.py", "modes": ["fix"]},
            "t4": {"file": "m4.py", "modes": ["fix"]},
        }
    )
    cli.grace_seconds = 0.2
    lead = leader(repo, [fix_task(1, deadline_seconds=120), fix_task(2)], cli, workers=1)
    thread, box = in_thread(lead)
    log = repo / ".tenure/attempts/r1/t1-1/agent.log"
    wait_for(lambda: log.exists() and "mode hang" in log.read_text())
    attempts = repo / ".tenure/attempts/r1"
    assert live_leader(attempts) is not None
    new = make_plan([fix_task(2), fix_task(4)])
    ReplanRequest(new, True, "t1 is no longer wanted").write(attempts)
    thread.join(60)
    assert box and box[0].done, box
    rows = status(repo)
    assert rows["t1"]["state"] == "cancelled"
    assert "t1 is no longer wanted" in rows["t1"]["reason"]
    assert rows["t2"]["state"] == "merged" and rows["t4"]["state"] == "merged"
    assert "return 1" in sh(repo, "show", "tenure/r1/t1/1:m1.py")  # its work is kept
    assert "cancelled by the leader" in log.read_text()
    assert live_leader(attempts) is None


def test_live_replan_lets_running_attempts_finish(repo: Path, agent: Agent) -> None:
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["sleep"], "seconds": 1.5},
            "t2": {"file": "m2.py", "modes": ["fix"]},
            "t3": {"file": "m3.py", "modes": ["fix"]},
        }
    )
    lead = leader(repo, [fix_task(1), fix_task(2)], cli, workers=1)
    thread, box = in_thread(lead)
    log = repo / ".tenure/attempts/r1/t1-1/agent.log"
    wait_for(lambda: log.exists() and "mode sleep" in log.read_text())
    new = make_plan([fix_task(3)])
    ReplanRequest(new, False, "t3 instead of t2").write(repo / ".tenure/attempts/r1")
    thread.join(60)
    assert box and box[0].done, box
    rows = status(repo)
    assert rows["t1"]["state"] == "dropped"  # it finished, but the new plan dropped it
    assert "return 1" not in sh(repo, "show", "tenure/r1/integration:m1.py")  # never merged
    assert rows["t2"]["state"] == "dropped" and rows["t2"]["attempt"] == 0
    assert rows["t3"]["state"] == "merged"
    assert "t1: dropped" in plan_md(repo)
    with open_store(f"sqlite:///{repo / '.tenure/state.db'}") as store:
        updates = [e for e in store.events("code/r1") if e.kind == "plan.update"]
    assert updates and updates[-1].data["dropped"] == ["t1", "t2"]


def test_stopping_the_leader_ends_its_agents_and_the_run_resumes(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["hang", "fix"]}})
    cli.grace_seconds = 0.2
    lead = leader(repo, [fix_task(1, deadline_seconds=120)], cli)
    stop = threading.Event()
    box: list[CodingOutcome] = []
    thread = threading.Thread(target=lambda: box.append(lead.run(stop)), daemon=True)
    thread.start()
    log = repo / ".tenure/attempts/r1/t1-1/agent.log"
    wait_for(lambda: log.exists() and "mode hang" in log.read_text())
    started = time.monotonic()
    stop.set()
    thread.join(30)
    assert time.monotonic() - started < 10 and box and not box[0].done
    assert "stopped" in box[0].reason and status(repo)["t1"]["state"] == "running"
    outcome = leader(repo, [fix_task(1)], cli).run()
    assert outcome.done and status(repo)["t1"]["attempt"] == 2


def test_live_replan_a_running_task_it_changes_is_not_merged_under_its_old_definition(
    repo: Path, agent: Agent
) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["sleep", "fix"], "seconds": 1.5}})
    lead = leader(repo, [fix_task(1)], cli, workers=1)
    thread, box = in_thread(lead)
    log = repo / ".tenure/attempts/r1/t1-1/agent.log"
    wait_for(lambda: log.exists() and "mode sleep" in log.read_text())
    changed = fix_task(1, goal="make m1.value() return 1, and say so in a comment")
    ReplanRequest(make_plan([changed]), False, "a clearer goal").write(repo / ".tenure/attempts/r1")
    thread.join(60)
    assert box and box[0].done, box
    rows = status(repo)
    assert rows["t1"]["state"] == "merged" and rows["t1"]["attempt"] == 2  # the new definition
    assert "say so in a comment" in sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/tasks/t1.md")
    merged = sh(repo, "log", "--format=%s", "tenure/r1/integration")
    assert "t1 merged" in merged and merged.count("t1 merged") == 1
