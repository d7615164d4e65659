"""The register's trust boundary with real processes, on the real SQLite file and Redis:
a keyless process that rewrites the register, a member without a key, a forged
envelope in queue mode; and the two ways a team's keys change under a register (a
rotation, a run without keys continued with them). Each attack is refused with a
security event, nothing it asked for runs, and the legitimate path still finishes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenure.coord import Credentials
from tenure.coord.credentials import init_team, rotate_lead
from tenure.protocol import load_plan
from tenure.roles import enqueue_plan
from tenure.roles.teams import reading
from tenure.store import Event

from .harness import Team, assert_run_safe
from .ledger_agent import KEYED_ENV

ATTACKER = Path(__file__).with_name("attacker.py")


def attack(team: Team, action: str, **options: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(ATTACKER), action, team.url, team.name, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def security(team: Team, kind: str) -> list[Event]:
    return [e for e in team.events() if e.kind == f"security.{kind}"]


def chain_plan(team: Team, tasks: int) -> list[str]:
    """``tasks`` tasks; the second depends on the first."""
    ids = team.write_plan(tasks)
    plan = yaml.safe_load(team.plan_path.read_text(encoding="utf-8"))
    plan["tasks"][1]["depends_on"] = [ids[0]]
    team.plan_path.write_text(yaml.safe_dump(plan), encoding="utf-8")
    return ids


def finished(team: Team, name: str, timeout: float) -> int:
    member = team.members[name]
    member.may_fail = True  # its exit status is the evidence
    return member.popen.wait(timeout=timeout)


def test_a_forged_done_is_refused_and_nothing_builds_on_it(team: Team) -> None:
    first, second, third = chain_plan(team, 3)
    # long enough that the attacker, a fresh process on a loaded machine, forges the
    # record before the real result lands (else it finds the task done, and forges nothing)
    team.run(workers=2, sleep="6")

    def running() -> bool:
        return team.store.get_task(team.name, first).state == "running"

    team.wait_for(f"{first} to run", lambda: _registered(team) and running(), 60)
    attack(team, "forge-done", task=first)  # with no key at all
    forged = team.store.get_task(team.name, first).result or {}
    assert forged.get("artifact") == {"forged": True}, "the real result landed first"
    code = finished(team, "run", 90)
    log = team.members["run"].log.read_text(encoding="utf-8", errors="replace")
    assert code == 3, log  # needs a person
    states = {t.task_id: t.state for t in team.store.tasks(team.name)}
    assert states == {first: "done", second: "queued", third: "done"}
    [refused] = security(team, "register_refused")
    assert refused.data["task_id"] == first and refused.data["state"] == "done"
    assert refused.data["claimed"] in ("lead", "w1", "worker-1", "worker-2", "unsealed")
    dispatched = [e.data["task_id"] for e in team.events() if e.kind == "task.dispatched"]
    assert second not in dispatched  # never started on the forged result
    assert team.store.get_task(team.name, second).attempt == 0
    shown = {t.task_id: reading.state_of(t) for t in reading.tasks(team.store, team.name)}
    assert shown[first] == "tampered"
    assert "tampered" in log and "need a person" in log
    assert [line["task_id"] for line in team.ledger().lines].count(third) == 1


def _registered(team: Team) -> bool:
    return len(team.store.tasks(team.name)) == len(team.task_ids)


def test_a_member_without_a_key_is_given_no_work(team: Team) -> None:
    team.write_plan(4)
    attack(team, "join-keyless", **{"as": "evil", "ttl": 120})
    team.start([("L1", 20)], workers=2, sleep="0.2")
    tasks = team.wait_settled(90)
    assert_run_safe(team, tasks)
    assert {t.assignee for t in tasks} <= {"w1", "w2"}
    [refused] = security(team, "member_refused")
    assert refused.data["member"] == "evil" and refused.data["incarnation"] == "evil-1"
    assert not [e for e in team.events() if e.kind == "task.dispatched" and
                e.data.get("assignee") == "evil"]  # fmt: skip


def test_a_queue_worker_runs_the_registers_task_not_a_forged_envelope(team: Team) -> None:
    [first, *_] = team.write_plan(3)
    flags = ("--queue", "--visibility", "60")
    for name in ("w1", "w2"):
        team.worker(name, *flags, sleep="0.5")
    team.wait_for("the workers to join", lambda: {"w1", "w2"} <= team.live_members(), 30)
    init_team(team.keys, team.name)
    lead = Credentials.load(team.keys, team.name, "operator", "lead")
    enqueue_plan(team.store, load_plan(team.plan_path), credentials=lead)
    stolen = {"keys": str(team.keys), "sign_as": "w2"}  # only a worker's key
    attack(team, "enqueue-forged", task=first, goal="FORGED GOAL", **stolen)
    tasks = team.wait_settled(60)
    team.wait_for("the forged envelope judged", lambda: security(team, "envelope_refused"), 30)
    assert_run_safe(team, tasks)
    [refused] = security(team, "envelope_refused")
    assert refused.data["task_id"] == first and refused.data["claimed"] == "w2"
    assert "goal" in refused.data["reason"]
    assert all(line["goal"] != "FORGED GOAL" for line in team.started())


def test_after_a_key_rotation_the_restarted_leader_finishes_the_plan(team: Team) -> None:
    team.write_plan(6)
    team.start([("L1", 20)], workers=2, sleep="0.8")
    team.wait_for("two tasks done", lambda: team.done_count() >= 2, 60)
    team.signal("L1", signal.SIGKILL)
    rotate_lead(team.keys, team.name)  # tenure keys rotate: the old public key is kept
    team.leader("L2", 20)  # the workers keep running: they read the new _lead.pub
    tasks = team.wait_settled(90)
    assert_run_safe(team, tasks)
    assert all(t.state == "done" for t in tasks)
    [again] = security(team, "register_resigned")
    assert again.data["rotated"] and again.data["adopted"] == []
    assert not security(team, "task_refused") and not security(team, "register_refused")
    assert finished(team, "L2", 30) == 0


def test_a_local_run_continued_in_team_mode_finishes_its_plan(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYED_ENV, "1")  # the stop may land mid-effect: the site is keyed
    team.write_plan(6)
    team.run("--mode", "local", workers=2, sleep="0.8", name="local")
    team.wait_for("a task done", lambda: team.done_count() >= 1, 60)
    team.signal("local", signal.SIGTERM)
    finished(team, "local", 30)
    assert team.done_count() < 6 and not team.keys.exists()  # keys are not made locally
    team.run(workers=2, sleep="0.2", name="team")
    assert finished(team, "team", 120) == 0
    tasks = team.store.tasks(team.name)
    assert all(t.state == "done" for t in tasks)
    [adopted] = security(team, "register_resigned")
    assert sorted(adopted.data["adopted"]) == team.task_ids
    assert not security(team, "task_refused") and not security(team, "register_refused")
    ledger = team.ledger().per_task()
    assert all(ledger[t] == 1 for t in team.task_ids), ledger


def test_a_fresh_start_on_the_run_that_makes_the_keys_signs_what_it_registers(
    team: Team,
) -> None:
    team.write_plan(3)
    team.run("--mode", "local", workers=2, sleep="0.1", name="local")
    assert finished(team, "local", 60) == 0
    team.run("--fresh", workers=2, sleep="0.1", name="fresh")
    assert finished(team, "fresh", 120) == 0
    assert all(t.state == "done" for t in team.store.tasks(team.name))
    assert not security(team, "task_refused")
