"""Attacks on a running team by a separate process with store access and at most one
worker's key: each is refused, nothing it asked for runs, a security event names it,
and the team still finishes its plan. Real leader and worker processes, signing as
every multi-process team does, on the real SQLite file and the real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tenure.store import Event

from .harness import Team

ATTACKER = Path(__file__).with_name("attacker.py")
KEEP = ("--keep-running",)  # the leader stays: an attack that lands after the plan is seen too


def attack(team: Team, action: str, **options: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ATTACKER), action, team.url, team.name, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def security(team: Team, kind: str) -> list[Event]:
    return [e for e in team.events() if e.kind == f"security.{kind}"]


def markers(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("PWNED*"))


def running_on(team: Team, worker: str) -> str:
    """A task id that ``worker`` is running right now."""

    def probe() -> str | None:
        for task in team.store.tasks(team.name):
            if task.state == "running" and task.assignee == worker:
                return task.task_id
        return None

    return team.wait_for(f"{worker} to run a task", probe, 30)


def test_a_forged_result_is_refused_and_the_real_one_counts(team: Team, tmp_path: Path) -> None:
    team.write_plan(3)
    team.start([("L1", 20)], workers=2, sleep="2.5", leader_flags=KEEP)
    task_id = running_on(team, "w1")
    assert attack(team, "forge-result", task=task_id, claim="w1").returncode == 0
    stolen = {"keys": str(team.keys), "sign_as": "w2"}  # w2's own key: it is no w1
    assert attack(team, "forge-result", task=task_id, claim="w1", **stolen).returncode == 0
    assert attack(team, "forge-result", task=task_id, claim="w2", **stolen).returncode == 0
    team.wait_for(
        "the three forgeries judged",
        lambda: len(security(team, "result_refused")) >= 2 and _refused_as(team, "w2"),
        60,
    )
    tasks = team.wait_settled(90)
    assert all(t.state == "done" for t in tasks)
    accepted = team.store.get_task(team.name, task_id).result or {}
    assert "forged" not in json.dumps(accepted.get("artifact")), accepted
    refused = security(team, "result_refused")
    assert len(refused) == 2, refused  # unsigned, and signed by w2 while claiming w1
    assert {e.data["sender"] for e in refused} == {"w1"}
    assert any("not signed" in e.data["reason"] for e in refused)
    assert any("w2 signed it" in e.data["reason"] for e in refused)
    not_its_own = _refused_as(team, "w2")
    assert not_its_own and "assigned to w1" in not_its_own[0].data["reason"]


def _refused_as(team: Team, sender: str) -> list[Event]:
    return [
        e
        for e in team.events()
        if e.kind == "leader.result_refused" and e.data.get("sender") == sender
    ]


def test_a_task_written_into_the_register_never_runs(team: Team, tmp_path: Path) -> None:
    team.write_plan(4)
    team.start([("L1", 20)], workers=2, sleep="0.3", leader_flags=KEEP)
    marker = tmp_path / "PWNED"
    assert attack(team, "inject-task", task="evil", marker=str(marker)).returncode == 0
    team.wait_for("the injected task set aside", lambda: security(team, "task_refused"), 60)

    def plan_done() -> dict[str, Any] | None:
        tasks = {t.task_id: t for t in team.store.tasks(team.name)}
        own = [tasks.get(t) for t in team.task_ids]
        return tasks if all(t is not None and t.state == "done" for t in own) else None

    tasks = team.wait_for("the plan's own tasks done", plan_done, 90)
    evil = tasks["evil"]
    assert evil.state == "blocked" and evil.attempt == 0  # never dispatched
    assert "not signed by the team's leadership" in evil.reason
    [refused] = security(team, "task_refused")
    assert refused.data["task_id"] == "evil"
    assert markers(tmp_path) == []  # neither its executor nor its command check ran


def test_an_envelope_a_leader_did_not_sign_is_not_obeyed(team: Team, tmp_path: Path) -> None:
    team.write_plan(3)
    team.start([("L1", 20)], workers=2, sleep="0.3", leader_flags=KEEP)
    marker = tmp_path / "PWNED"
    options: dict[str, Any] = {"task": "t01", "to": "w1", "marker": str(marker)}
    assert attack(team, "inject-assign", **options).returncode == 0
    worker_key = {"keys": str(team.keys), "sign_as": "w2"}  # a worker's key forges no leader
    assert attack(team, "inject-assign", **options, **worker_key).returncode == 0
    team.wait_for(
        "both envelopes refused", lambda: len(security(team, "envelope_refused")) >= 2, 30
    )
    tasks = team.wait_settled(90)
    assert all(t.state == "done" for t in tasks)
    refused = security(team, "envelope_refused")
    assert {e.data["member"] for e in refused} == {"w1"}
    assert {e.data["claimed"] for e in refused} == {None, "w2"}
    assert markers(tmp_path) == []


def test_a_stolen_lease_commands_nobody(team: Team, tmp_path: Path) -> None:
    team.write_plan(4)
    team.start([("L1", 20)], workers=2, sleep="0.5", leader_flags=KEEP)
    team.wait_for("a task done", lambda: team.done_count() >= 1, 30)
    marker = tmp_path / "PWNED"
    stolen = attack(team, "steal-lease", **{"as": "L1", "ttl": 1.5, "task": "t04", "to": "w1"},
                    marker=str(marker))  # fmt: skip
    assert stolen.returncode == 0, stolen.stderr
    team.wait_for("the forged envelope refused", lambda: security(team, "envelope_refused"), 30)
    tasks = team.wait_settled(90)  # the real leader leads again once the stolen lease lapses
    assert all(t.state == "done" for t in tasks)
    assert markers(tmp_path) == []


def test_a_member_cannot_push_the_teams_epoch_to_the_end(team: Team, tmp_path: Path) -> None:
    huge = attack(team, "push-epoch", epoch=2**63)
    assert huge.returncode != 0 and "highest_epoch" in huge.stderr  # refused, not stored
    team.write_plan(4)
    team.start([("L1", 20), ("L2", 10)], workers=2, sleep="0.3", leader_flags=KEEP)
    assert attack(team, "push-epoch", epoch=10**12).returncode == 0
    team.wait_for("the push noticed", lambda: security(team, "epoch_refused"), 60)
    tasks = team.wait_settled(90)
    assert all(t.state == "done" for t in tasks)
    assert team.store.current_epoch(team.name) < 1000  # the team was not pushed
    [doubt] = security(team, "epoch_refused")[:1]
    assert doubt.data["member"] == "pusher" and doubt.data["reported"] == 10**12
