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

from tenure.protocol.envelope import MAX_EPOCH_JUMP
from tenure.store import Event

from .harness import Team, assert_run_safe

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
    odd = {**stolen, "by": "../../etc/x"}  # a signer id that is no member id
    assert attack(team, "forge-result", task=task_id, claim="w2", **odd).returncode == 0
    team.wait_for(
        "the four forgeries judged", lambda: len(security(team, "result_refused")) >= 4, 60
    )
    tasks = team.wait_settled(90)
    assert all(t.state == "done" for t in tasks)
    accepted = team.store.get_task(team.name, task_id).result or {}
    assert "forged" not in json.dumps(accepted.get("artifact")), accepted
    refused = security(team, "result_refused")
    assert len(refused) == 4, refused
    said = {(e.data["sender"], e.data["claimed"]) for e in refused}
    # unsigned; signed by w2 claiming w1; w2's own for w1's task; a malformed signer
    assert said == {("w1", None), ("w1", "w2"), ("w2", "w2"), ("w2", "../../etc/x")}
    assert any("not signed" in e.data["reason"] for e in refused)
    assert any("w2 signed it" in e.data["reason"] for e in refused)
    assert any("assigned to w1" in e.data["reason"] for e in refused)
    assert any("no member id" in e.data["reason"] for e in refused)
    assert not [e for e in team.events() if e.kind == "leader.bad_message"]


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
    tasks = team.wait_settled(90)  # the real leader seized its lease back
    assert all(t.state == "done" for t in tasks)
    assert markers(tmp_path) == []


THIEF_SECONDS = 40.0  # how long a thief keeps renewing what it stole, unless refused


def start_attack(team: Team, action: str, **options: Any) -> subprocess.Popen[str]:
    """An attacker that stays: it keeps renewing the lease it stole (``renew_for``)."""
    return subprocess.Popen(
        [sys.executable, str(ATTACKER), action, team.url, team.name, json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def thief_said(thief: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    """The stolen epoch, and how its renewals ended; the thief has exited by then."""
    assert thief.stdout is not None
    try:
        out, err = thief.communicate(timeout=THIEF_SECONDS + 30)
    finally:
        thief.kill()
    assert thief.returncode == 0, err
    first, last = (json.loads(line) for line in out.splitlines()[:2])
    return int(first["epoch"]), last


def steal(team: Team, tmp_path: Path, claim_as: str, **options: Any) -> tuple[int, dict[str, Any]]:
    """Steal the lease as ``claim_as`` while a task is done and more are to do, keep
    renewing it, and wait for the team to finish; the stolen epoch and the thief's end."""
    team.wait_for("a task done", lambda: team.done_count() >= 1, 30)
    thief = start_attack(
        team,
        "steal-lease",
        **{"as": claim_as, "ttl": 1.5, "renew_for": THIEF_SECONDS, "task": "t04", "to": "w1"},
        marker=str(tmp_path / "PWNED"),
        **options,
    )
    try:
        tasks = team.wait_settled(THIEF_SECONDS)  # long before the thief would give up
    finally:
        stolen, ended = thief_said(thief)
    assert all(t.state == "done" for t in tasks)
    assert markers(tmp_path) == []  # the envelope it sent under its lease never ran
    return stolen, ended


def seizures_of(team: Team, epoch: int) -> list[Event]:
    return [
        e for e in team.events() if e.kind == "lease.claimed" and e.data.get("over_epoch") == epoch
    ]


def test_a_stolen_lease_kept_renewed_is_seized_back_at_once(team: Team, tmp_path: Path) -> None:
    team.write_plan(5)
    team.start([("L1", 20)], workers=2, sleep="0.5", leader_flags=KEEP)
    stolen, ended = steal(team, tmp_path, "L1")
    # the thief's renewal was refused long before it meant to stop renewing
    assert ended["lost"] is True and ended["held_for"] < THIEF_SECONDS / 2, ended
    [refused] = [e for e in security(team, "lease_refused") if e.data["epoch"] == stolen]
    assert (refused.data["leader"], refused.data["claimed"]) == ("L1", "L1")
    assert "never claimed" in refused.data["reason"]
    [taken] = security(team, "lease_taken")  # the real L1 saw its id at another epoch
    assert taken.data["leader"] == "L1" and taken.data["taken_at"] == stolen
    [seized] = seizures_of(team, stolen)
    assert seized.data["holder"] == "L1" and seized.epoch is not None and seized.epoch > stolen
    proved = [e for e in team.events() if e.kind == "lease.proved" and e.epoch == seized.epoch]
    assert proved, "the seized lease was never proved"
    assert not [e for e in team.events() if e.kind == "lease.proved" and e.epoch == stolen]


def test_a_proof_copied_out_of_the_store_proves_no_other_lease(
    team: Team, tmp_path: Path
) -> None:
    team.write_plan(5)
    team.start([("L1", 20)], workers=2, sleep="0.5", leader_flags=KEEP)
    stolen, ended = steal(team, tmp_path, "L1", replay_proof=True)
    assert ended["lost"] is True and ended["held_for"] < THIEF_SECONDS / 2, ended
    [refused] = [e for e in security(team, "lease_refused") if e.data["epoch"] == stolen]
    assert refused.data["claimed"] == "L1"
    assert "lead key did not make" in refused.data["reason"]  # the copy names another epoch
    assert len(seizures_of(team, stolen)) == 1


def test_an_unproven_lease_under_a_new_id_is_seized_by_one_candidate(
    team: Team, tmp_path: Path
) -> None:
    team.write_plan(5)
    team.start([("L1", 20), ("L2", 10)], workers=2, sleep="0.5", leader_flags=KEEP)
    stolen, ended = steal(team, tmp_path, "L9")
    assert ended["lost"] is True and ended["held_for"] < THIEF_SECONDS / 2, ended
    refused = [e for e in security(team, "lease_refused") if e.data["epoch"] == stolen]
    assert refused and {e.data["claimed"] for e in refused} == {"L9"}
    assert all("carries no proof" in e.data["reason"] for e in refused)
    # both candidates may refuse it; the store lets one of them replace it
    [seized] = seizures_of(team, stolen)
    assert seized.data["holder"] in ("L1", "L2")
    elected: dict[int, set[str]] = {}
    for event in team.events():
        if event.kind == "leader.elected" and event.epoch is not None:
            elected.setdefault(event.epoch, set()).add(str(event.data["leader"]))
    assert all(len(leaders) == 1 for leaders in elected.values()), elected
    assert stolen not in elected  # nobody led under the stolen epoch
    assert_run_safe(team, team.store.tasks(team.name))


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


def test_a_process_that_reads_the_lease_can_neither_end_it_nor_push_the_epoch(
    team: Team, tmp_path: Path
) -> None:
    """No key and no token: the lease's holder and epoch, which anyone may read, neither
    release, renew nor prove it, and no claim or seizure lifts the epoch far."""
    team.write_plan(4)
    team.start([("L1", 20), ("L2", 10)], workers=2, sleep="0.5", leader_flags=KEEP)
    team.wait_for("a task done", lambda: team.done_count() >= 1, 30)
    held = team.store.current_lease(team.name)
    assert held is not None and held.holder == "L1"
    tried = attack(team, "end-lease")
    assert tried.returncode == 0, tried.stderr
    said = json.loads(tried.stdout)
    assert (said["holder"], said["epoch"]) == ("L1", held.epoch)
    assert said["release"] == [False, False, False]
    assert [r[0] for r in said["renew"] + said["prove"]] == ["LeaseLost"] * 6
    for far in (10**12, 2**53 - 2):
        assert said[f"claim {far}"][0] == "Conflict"  # the leader's lease is live
        refused, why = said[f"seize {far}"]
        assert refused == "ProtocolError" and why.startswith("at_least: ")
        assert str(MAX_EPOCH_JUMP) in why and str(far) in why
    tasks = team.wait_settled(90)
    assert all(t.state == "done" for t in tasks)
    # the leader kept its lease and its epoch: no one stepped down, no one was elected
    kept = team.store.current_lease(team.name)
    assert kept is not None and (kept.holder, kept.epoch) == ("L1", held.epoch)
    assert kept.expires_at - team.store.now() < 60  # not renewed for 600 s
    assert team.store.current_epoch(team.name) == held.epoch
    events = team.events()
    assert [e.epoch for e in events if e.kind == "lease.claimed"] == [held.epoch]
    assert [e.epoch for e in events if e.kind == "lease.proved"] == [held.epoch]
    assert [e.data["leader"] for e in events if e.kind == "leader.elected"] == ["L1"]
    stepped = [e for e in events if e.kind in ("lease.released", "leader.stepped_down")]
    assert stepped == [] and security(team, "lease_refused") == []
    assert not [e for e in events if "evil" in json.dumps(e.data)]
