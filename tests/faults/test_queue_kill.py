"""Queue mode with real worker processes killed by SIGKILL: what a dead worker held
comes back once its heartbeat lapses (not after the visibility timeout), a result it
recorded is finished by the next worker, and every effect happens once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tenure.coord import Credentials
from tenure.coord.credentials import init_team
from tenure.protocol import load_plan
from tenure.roles import enqueue_plan

from .harness import (
    FAULTS_DIR,
    SCHEDULING_SLACK,
    WORKER_TTL,
    Team,
    assert_run_safe,
    of_kind,
)
from .ledger_agent import LEDGER_ENV, SLEEP_ENV, STARTED_ENV

pytestmark = pytest.mark.slow

RUN_MEMBER_TTL = 3.0  # what `tenure run` gives the workers it starts (`--member-ttl` default)
VISIBILITY = 330.0


def _enqueue(team: Team) -> None:
    init_team(team.keys, team.name)
    credentials = Credentials.load(team.keys, team.name, "leader", "lead")
    plan = load_plan(team.plan_path)
    enqueue_plan(team.store, plan, credentials=credentials)


def test_a_killed_queue_workers_message_comes_back_within_its_heartbeat_ttl(team: Team) -> None:
    [task_id] = team.write_plan(1)
    flags = ("--queue", "--visibility", f"{VISIBILITY:g}")
    team.worker("w1", *flags, sleep="60")  # takes the task and never finishes it
    team.wait_for("w1 to join", lambda: "w1" in team.live_members(), 30)
    _enqueue(team)
    team.wait_for("w1 to start the task", lambda: team.started(), 30)
    team.worker("w2", *flags, sleep="0.1")
    team.wait_for("w2 to join", lambda: "w2" in team.live_members(), 30)

    killed_at = team.signal("w1", signal.SIGKILL)
    key = f"{task_id}:attempt-1"
    taken = team.wait_event(
        "effect.claimed",
        VISIBILITY / 10,
        lambda e: e.data.get("key") == key and e.data.get("holder") == "w2",
    )
    back = taken.at - killed_at
    bound = 2 * WORKER_TTL + SCHEDULING_SLACK  # lapse after the last beat, then one poll
    print(
        f"message back {back:.2f}s after SIGKILL (bound {bound:.2f}s, visibility {VISIBILITY:g}s)"
    )
    assert back <= bound

    tasks = team.wait_settled(60)
    ledger = assert_run_safe(team, tasks)
    [line] = ledger.of(task_id)
    assert line["worker"] == "w2"
    assert tasks[0].assignee == "w2"


def _stalling_plan(team: Team, stall: Path) -> list[str]:
    """Three tasks; the first review of t01 hangs in its command check (the first run
    of the check makes a directory and sleeps), so a test can kill its worker there."""
    team.write_plan(3, deadline=20.0)
    plan = yaml.safe_load(team.plan_path.read_text(encoding="utf-8"))
    plan["tasks"][0]["checks"] = [
        {"kind": "command", "run": f"mkdir {stall} 2>/dev/null && sleep 60; exit 0"}
    ]
    team.plan_path.write_text(yaml.safe_dump(plan), encoding="utf-8")
    return team.task_ids


def test_a_result_recorded_by_a_killed_worker_is_finished_by_the_next(team: Team) -> None:
    """SIGKILL between recording the effect and judging it: `tenure run --mode queue`
    still exits 0 with every task done, the effect once, nothing left running."""
    stall = team.dir / "stall.d"
    task_ids = _stalling_plan(team, stall)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(FAULTS_DIR), os.environ.get("PYTHONPATH", "")) if p
        ),
        LEDGER_ENV: str(team.ledger_path),
        STARTED_ENV: str(team.started_path),
        SLEEP_ENV: "0.1-0.3",
    }
    env.pop("TENURE_STORE", None)
    argv = [sys.executable, "-m", "tenure", "run", str(team.plan_path), "--mode", "queue"]
    argv += ["--workers", "2", "--exec", "python:ledger_agent:run", "--store", team.url]
    argv += ["--insecure", "--state-dir", str(team.dir / "state")]
    log = team.dir / "run.log"
    with open(log, "wb") as out:
        run = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=team.dir,
            start_new_session=True,
        )
    try:
        key = f"{task_ids[0]}:attempt-1"
        team.wait_for(
            "t01's effect recorded and its review under way",
            lambda: stall.exists() and of_kind(team.events(), "effect.done", key=key),
            60,
        )
        [holder] = [s["pid"] for s in team.started() if s["task_id"] == task_ids[0]]
        os.kill(holder, signal.SIGKILL)
        killed_at = time.time()
        code = run.wait(timeout=60)
        finished_at = time.time()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    print(log.read_text(encoding="utf-8", errors="replace")[-2000:])
    assert code == 0
    # not held back by the dead worker's visibility timeout (25 s): a few heartbeat TTLs
    assert finished_at - killed_at <= 2 * RUN_MEMBER_TTL + 2 * SCHEDULING_SLACK

    tasks = team.store.tasks(team.name)
    ledger = assert_run_safe(team, tasks)
    assert all(t.state == "done" for t in tasks)
    [line] = ledger.of(task_ids[0])
    assert line["pid"] == holder  # recorded by the killed worker, and not run again
    first = next(t for t in tasks if t.task_id == task_ids[0])
    assert first.attempt == 1
    assert of_kind(team.events(), "queue.review_resumed", task_id=task_ids[0])
