"""``tenure cancel --team code/RUN TASK`` stops a coding task: a running attempt's agent is
stopped (its worktree and branch kept), a pending task is never dispatched; the row and
the register both say cancelled, and the rest of the run goes on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome
from tenure.store import open_store

from .conftest import fix_task, make_plan, sh
from .test_coding_answer import at, state, tenure, wait_for

Agent = Callable[[dict[str, Any]], AgentCLI]


def start(config: CodingConfig) -> tuple[threading.Thread, list[CodingOutcome]]:
    box: list[CodingOutcome] = []
    thread = threading.Thread(target=lambda: box.append(CodingLeader(config).run()), daemon=True)
    thread.start()
    return thread, box


def rows(repo: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in yaml.safe_load(at(repo, "status.yml"))["tasks"]}


def cancel(url: str, task_id: str, reason: str) -> None:
    done = tenure("cancel", task_id, "--store", url, "--team", "code/r1", "--reason", reason)
    assert done.returncode == 0, done.stderr


def test_cancelling_a_running_task_stops_its_agent_and_keeps_its_branch(
    repo: Path, agent: Agent, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    cli = agent(
        {"t1": {"file": "m1.py", "modes": ["hang"]}, "t2": {"file": "m2.py", "modes": ["fix"]}}
    )
    plan = make_plan([fix_task(1, deadline_seconds=600), fix_task(2)])
    thread, box = start(CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", store_url=url))
    log = repo / ".tenure/attempts/r1/t1-1/agent.log"
    wait_for(lambda: log.exists() and "mode hang" in log.read_text(), "t1 never started")
    cancel(url, "t1", "not needed any more")
    thread.join(timeout=120)
    assert box, "the leader did not end after the cancel (the agent hangs for 600 s)"
    outcome = box[0]
    assert not outcome.done and outcome.states == {"t1": "cancelled", "t2": "merged"}
    row = rows(repo)["t1"]
    assert row["state"] == "cancelled" and row["attempt"] == 1
    assert "cancelled by the operator: not needed any more" in row["reason"]
    # what the agent wrote before it was stopped is committed on its branch, not lost
    assert "return 1" in sh(repo, "show", "tenure/r1/t1/1:m1.py")
    with open_store(url) as store:
        assert state(store, "t1") == "cancelled"
        cancelled = [e for e in store.events("code/r1") if e.kind == "code.cancelled"]
        assert [e.data["task_id"] for e in cancelled] == ["t1"]


def test_cancelling_a_pending_task_means_it_is_never_dispatched(
    repo: Path, agent: Agent, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    gate = tmp_path / "let-t1-finish"
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["waitfor"], "path": str(gate)},
            "t2": {"file": "m2.py", "modes": ["fix"]},
        }
    )
    plan = make_plan([fix_task(1), fix_task(2)])
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", store_url=url, workers=1)
    thread, box = start(config)
    try:
        with open_store(url) as store:
            wait_for(lambda: state(store, "t1") == "running", "t1 never started")
            cancel(url, "t2", "out of scope")
            wait_for(lambda: rows(repo)["t2"]["state"] == "cancelled", "t2 was not cancelled")
    finally:
        gate.write_text("go\n")
        thread.join(timeout=120)
    assert box and box[0].states == {"t1": "merged", "t2": "cancelled"}
    row = rows(repo)["t2"]
    assert row["attempt"] == 0 and "cancelled by the operator: out of scope" in row["reason"]
    assert not (repo / ".tenure/attempts/r1/t2-1").exists()
