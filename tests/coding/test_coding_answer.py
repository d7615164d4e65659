"""The operator's side of a coding run: `tenure inbox` lists a task that failed every
attempt, `tenure answer --team code/RUN` answers it, and the leader (on resume, or while
it runs) puts the answer into the task file's Q&A and gives the task fresh attempts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome
from tenure.store import open_store

from .conftest import fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]
ANSWER = "value() must return 1, not 0"


def tenure(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args], capture_output=True, text=True, timeout=60
    )


def at(repo: Path, path: str) -> str:
    return sh(repo, "show", f"tenure/r1/integration:.tenure/runs/r1/{path}")


def test_answer_from_the_inbox_then_resume(repo: Path, agent: Agent, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    cli = agent(
        {"t1": {"file": "m1.py", "modes": ["qa"]}, "t2": {"file": "m2.py", "modes": ["fix"]}}
    )
    plan = make_plan([fix_task(1), fix_task(2, depends_on=["t1"])])
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", store_url=url)
    first = CodingLeader(config).run()
    assert first.states == {"t1": "needs-operator", "t2": "blocked"}
    inbox = tenure("inbox", "--store", url)
    assert inbox.returncode == 0, inbox.stderr
    assert "code/r1" in inbox.stdout and "3 attempts failed" in inbox.stdout
    shown = tenure("status", "--store", url, "--team", "code/r1")
    assert "blocked" in shown.stdout and "t1" in shown.stdout
    answered = tenure("answer", "t1", ANSWER, "--store", url, "--team", "code/r1")
    assert answered.returncode == 0, answered.stderr
    # a task blocked behind t1, answered before it ever ran, still gets its whole task file
    early = tenure("answer", "t2", "wait for t1", "--store", url, "--team", "code/r1")
    assert early.returncode == 0, early.stderr
    second = CodingLeader(config).run()  # resume: the answers are taken at open
    assert second.done, second.reason
    task_md = at(repo, "tasks/t1.md")
    qa = task_md.partition("Questions and answers (append-only)")[2]
    assert "3 attempts failed" in qa and f"**A (operator):** {ANSWER}" in qa
    status = {r["id"]: r for r in yaml.safe_load(at(repo, "status.yml"))["tasks"]}
    assert status["t1"]["attempt"] == 4 and status["t1"]["state"] == "merged"
    assert status["t2"]["state"] == "merged"
    t2_md = at(repo, "tasks/t2.md")
    assert "## Goal" in t2_md and t2_md.rstrip().endswith("**A (operator):** wait for t1")
    assert "operator answered t1" in sh(repo, "log", "--format=%s", "tenure/r1/integration")
    with open_store(url) as store:
        record = store.get_task("code/r1", "t1")
        assert record.state == "done" and record.data["qa_seen"] == 1
        answers = [e for e in store.events("code/r1") if e.kind == "code.answered"]
        assert answers and answers[0].data["answers"] == [ANSWER]
    assert "the inbox is empty" in tenure("inbox", "--store", url).stdout


def test_a_running_leader_takes_an_answer(repo: Path, agent: Agent, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    gate = tmp_path / "let-t3-finish"
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["qa"]},
            "t3": {"file": "m3.py", "modes": ["waitfor"], "path": str(gate)},
        }
    )
    plan = make_plan([fix_task(3), fix_task(1)])
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", store_url=url)
    box: list[CodingOutcome] = []
    thread = threading.Thread(target=lambda: box.append(CodingLeader(config).run()), daemon=True)
    thread.start()
    try:
        with open_store(url) as store:
            wait_for(lambda: state(store, "t1") == "blocked", "t1 never reached the inbox")
            answered = tenure("answer", "t1", ANSWER, "--store", url, "--team", "code/r1")
            assert answered.returncode == 0, answered.stderr
            # accepted; merged after t3, which is first in plan order and still running
            wait_for(lambda: state(store, "t1") == "review", "the running leader never took it")
    finally:
        gate.write_text("go\n")
        thread.join(timeout=120)
    assert box and box[0].done, box
    status = {r["id"]: r for r in yaml.safe_load(at(repo, "status.yml"))["tasks"]}
    assert status["t1"]["attempt"] == 4 and status["t3"]["attempt"] == 1


def state(store: Any, task_id: str) -> str:
    try:
        return str(store.get_task("code/r1", task_id).state)
    except Exception:
        return "absent"


def wait_for(predicate: Callable[[], bool], what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
