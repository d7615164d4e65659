"""A worker SIGKILLed mid-task: its heartbeat goes stale, the task is re-dispatched as a new
attempt, completes, and its effect still happens exactly once."""

from __future__ import annotations

import signal

import pytest

from .harness import Team, assert_run_safe, of_kind, stale_worker_bound

pytestmark = pytest.mark.slow


def test_sigkill_of_a_worker_mid_task(team: Team) -> None:
    team.write_plan(9)
    team.worker("w1", "--priority", "10", sleep="60")  # first to be picked; never finishes
    team.worker("w2")
    team.worker("w3")
    team.leader("L1", 30)

    started = team.wait_for(
        "w1 to start a task", lambda: [s for s in team.started() if s["worker"] == "w1"], 30
    )[0]
    task_id = started["task_id"]
    killed_at = team.signal("w1", signal.SIGKILL)
    retry = team.wait_event(
        "task.retry", stale_worker_bound() + 10, lambda e: e.data.get("task_id") == task_id
    )
    noticed = retry.at - killed_at
    print(
        f"stale heartbeat noticed {noticed:.2f}s after SIGKILL (bound {stale_worker_bound():.2f}s)"
    )
    assert "w1 stopped heartbeating" in retry.data["why"]
    assert noticed <= stale_worker_bound()

    tasks = team.wait_settled(60)
    ledger = assert_run_safe(team, tasks)
    record = next(t for t in tasks if t.task_id == task_id)
    assert record.state == "done" and record.attempt >= 2
    [line] = ledger.of(task_id)
    assert line["worker"] != "w1" and line["attempt"] >= 2
    assert of_kind(team.events(), "task.dispatched", task_id=task_id)
