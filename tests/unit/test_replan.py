"""Goal shift with real processes on SQLite and Redis: `tenure replan` on a team led by a
`tenure leader` process with `tenure worker` processes, on a local `tenure run`, on a
queue-mode team; re-running a finished plan; a changed plan refused; exit statuses."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import LEASE_TOKEN
from tenure.protocol import load_plan, to_dict
from tenure.protocol.messages import PlanUpdate
from tenure.protocol.taskspec import spec_for
from tenure.roles.register.revision import (
    PlanRequest,
    Revision,
    pending_request,
    plan_digest,
    record_revision,
    write_request,
)
from tenure.store import Store, TaskRecord, open_store

TEAM = "demo"

AGENT = """\
import json, os, sys, time
env = json.load(sys.stdin)
if env["task_id"] == "ask":
    print(json.dumps({"status": "blocked", "question": "which currency?"}))
    sys.exit(0)
gate = env["input"].get("gate")  # runs until the test opens the gate (a file)
deadline = time.monotonic() + 60
while gate and not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"task": env["task_id"], "goal": env["goal"]}))
"""


def task(task_id: str, goal: str, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "goal": goal, **extra}


def write_plan(path: Path, *tasks: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"team": TEAM, "tasks": list(tasks)}))
    return path


def env() -> dict[str, str]:
    values = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    values.pop("TENURE_STORE", None)
    return values


def tenure(cwd: Path, *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        stdin=subprocess.DEVNULL,
    )


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        stdin=subprocess.DEVNULL,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 90.0) -> tuple[int, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out + err


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def records(store_url: str) -> dict[str, TaskRecord]:
    with open_store(store_url) as store:
        return {t.task_id: t for t in store.tasks(TEAM)}


def wait_for(predicate: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def running(store_url: str, task_id: str) -> Callable[[], bool]:
    def check() -> bool:
        found = records(store_url).get(task_id)
        return found is not None and found.state == "running"

    return check


def events(store_url: str, kind: str) -> list[dict[str, Any]]:
    with open_store(store_url) as store:
        return [e.data for e in _all_events(store) if e.kind == kind]


def _all_events(store: Store) -> list[Any]:
    found, after = [], 0
    while True:
        batch = store.events(TEAM, after=after, limit=1000)
        if not batch:
            return found
        found += batch
        after = batch[-1].seq


def dispatched(store_url: str, task_id: str) -> int:
    return sum(1 for e in events(store_url, "task.dispatched") if e["task_id"] == task_id)


def agent(path: Path) -> str:
    (path / "agent.py").write_text(AGENT)
    return f"command:{sys.executable} {path / 'agent.py'}"


def team_members(
    path: Path, store_url: str, procs: list[subprocess.Popen[str]], workers: int = 1
) -> subprocess.Popen[str]:
    """A `tenure leader` process and worker processes for the plan in ``plan.yaml``."""
    spec = agent(path)
    lead = start(path, "leader", "plan.yaml", "--store", store_url, "--insecure", "--member", "lead")
    procs.append(lead)
    for n in range(1, workers + 1):
        procs.append(
            start(
                path, "worker", "--store", store_url, "--team", TEAM, "--insecure",
                "--member", f"w{n}", "--exec", spec,
            )
        )
    return lead


def old_plan(gate: Path) -> tuple[dict[str, Any], ...]:
    return (
        task("slow", "take your time", input={"gate": str(gate)}),
        task("keep", "the old goal", depends_on=["slow"]),
        task("drop", "no longer wanted", depends_on=["slow"]),
    )


def new_plan(gate: Path) -> tuple[dict[str, Any], ...]:
    return (
        task("slow", "take your time", input={"gate": str(gate)}),
        task("keep", "the new goal", depends_on=["slow"]),
        task("added", "a task the new plan adds"),
    )


def assert_shifted(store_url: str) -> None:
    """What a replan from old_plan to new_plan leaves once the team is done."""
    found = records(store_url)
    assert found["slow"].state == "done"
    assert found["keep"].state == "done"
    assert found["keep"].result["artifact"]["goal"] == "the new goal"  # never the old one
    assert found["drop"].state == "cancelled" and "goal shift" in found["drop"].reason
    assert dispatched(store_url, "drop") == 0  # dropped before it ever started
    assert found["added"].state == "done"
    updates = events(store_url, "plan.update")
    assert len(updates) == 1, updates
    update = updates[0]
    assert update["revision"] == 2 and update["reason"] == "goal shift"
    assert (update["added"], update["dropped"], update["changed"]) == (["added"], ["drop"], ["keep"])
    body = PlanUpdate.model_validate({k: update[k] for k in ("revision", "reason", "tasks")})
    assert [t.id for t in body.tasks] == ["slow", "keep", "added"]  # a plan.update body


def test_replan_a_team_of_leader_and_worker_processes(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    gate = tmp_path / "gate"
    write_plan(tmp_path / "plan.yaml", *old_plan(gate))
    write_plan(tmp_path / "new.yaml", *new_plan(gate))
    lead = team_members(tmp_path, store_url, procs)
    wait_for(running(store_url, "slow"))
    shifted = tenure(
        tmp_path, "replan", "new.yaml", "--team", TEAM, "--store", store_url,
        "--reason", "goal shift", "--let-running-finish",
    )
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert "revision 2 (leader lead)" in shifted.stdout
    gate.touch()
    code, output = finish(lead)
    assert code == 0, output
    assert_shifted(store_url)
    log = tenure(tmp_path, "log", "--team", TEAM, "--store", store_url, "--limit", "1000")
    assert "plan.update" in log.stdout and "goal shift" in log.stdout
    status = tenure(tmp_path, "status", "--team", TEAM, "--store", store_url)
    assert "plan revision 2" in status.stdout and "goal shift" in status.stdout


def test_replan_a_local_run(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    gate = tmp_path / "gate"
    write_plan(tmp_path / "plan.yaml", *old_plan(gate))
    write_plan(tmp_path / "new.yaml", *new_plan(gate))
    spec = agent(tmp_path)
    run = start(
        tmp_path, "run", "plan.yaml", "--mode", "local", "--workers", "1",
        "--store", store_url, "--exec", spec,
    )
    procs.append(run)
    wait_for(running(store_url, "slow"))
    shifted = tenure(tmp_path, "replan", "new.yaml", "--store", store_url, "--reason", "goal shift")
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert "revision 2 (leader leader)" in shifted.stdout  # the local run's leader took it
    gate.touch()
    code, output = finish(run)
    assert code == 0, output
    assert_shifted(store_url)


@pytest.mark.parametrize("mode", ["--let-running-finish", "--cancel-running"])
def test_a_running_task_the_new_plan_drops_is_never_accepted(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]], mode: str
) -> None:
    gate = tmp_path / "gate"
    write_plan(tmp_path / "plan.yaml", task("slow", "soon unwanted", input={"gate": str(gate)}))
    write_plan(tmp_path / "new.yaml", task("other", "what we want now"))
    lead = team_members(tmp_path, store_url, procs)
    wait_for(running(store_url, "slow"))
    shifted = tenure(
        tmp_path, "replan", "new.yaml", "--team", TEAM, "--store", store_url,
        "--reason", "goal shift", mode,
    )
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert "(leader lead)" in shifted.stdout
    gate.touch()
    code, output = finish(lead)
    assert code == 0, output
    found = records(store_url)
    assert found["slow"].state == "cancelled" and "goal shift" in found["slow"].reason
    assert found["other"].state == "done"
    if mode == "--let-running-finish":  # it finished: its result is recorded, not accepted
        assert found["slow"].result is not None
        assert found["slow"].result["artifact"]["task"] == "slow"
        assert [e["task_id"] for e in events(store_url, "replan.dropped")] == ["slow"]
    else:  # cancelled while it ran
        assert found["slow"].result is None
    with open_store(store_url) as store:  # no verdict ever accepted it
        verdicts = [
            e for e in _all_events(store)
            if e.kind == "verify.verdict" and e.data.get("task_id") == "slow"
        ]
    assert verdicts == []


def test_replan_a_queue_mode_team(tmp_path: Path, store_url: str) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "second"))
    write_plan(tmp_path / "new.yaml", task("a", "first"), task("c", "third"))
    spec = agent(tmp_path)
    first = tenure(tmp_path, "run", "plan.yaml", "--mode", "queue", "--store", store_url,
                   "--exec", spec)
    assert first.returncode == 0, first.stdout + first.stderr
    shifted = tenure(tmp_path, "replan", "new.yaml", "--store", store_url, "--reason", "c too")
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert "queue mode" in shifted.stdout
    assert records(store_url)["c"].state == "queued"
    second = tenure(tmp_path, "run", "new.yaml", "--mode", "queue", "--store", store_url,
                    "--exec", spec)
    assert second.returncode == 0, second.stdout + second.stderr
    found = records(store_url)
    assert {k: r.state for k, r in found.items()} == {"a": "done", "b": "done", "c": "done"}
    assert found["a"].attempt == 1  # not run again


@pytest.mark.parametrize("command", ["run", "leader"])
def test_an_unchanged_rerun_says_already_done(
    tmp_path: Path, store_url: str, command: str
) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "second"))
    spec = agent(tmp_path)
    first = tenure(tmp_path, "run", "plan.yaml", "--mode", "local", "--store", store_url,
                   "--exec", spec)
    assert first.returncode == 0, first.stdout + first.stderr
    before = records(store_url)
    args = ["--mode", "local", "--exec", spec] if command == "run" else ["--insecure"]
    again = tenure(tmp_path, command, "plan.yaml", "--store", store_url, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 tasks already done" in again.stdout and "nothing to do" in again.stdout
    assert "--fresh" in again.stdout
    assert records(store_url) == before  # nothing ran, nothing was written


@pytest.mark.parametrize("command", ["run", "leader"])
def test_a_changed_plan_without_replan_is_refused(
    tmp_path: Path, store_url: str, command: str
) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "second"))
    spec = agent(tmp_path)
    first = tenure(tmp_path, "run", "plan.yaml", "--mode", "local", "--store", store_url,
                   "--exec", spec)
    assert first.returncode == 0, first.stdout + first.stderr
    before = records(store_url)
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "a new goal"))
    args = ["--mode", "local", "--exec", spec] if command == "run" else ["--insecure"]
    refused = tenure(tmp_path, command, "plan.yaml", "--store", store_url, *args)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "tenure replan" in lines[0], refused.stderr
    assert "Traceback" not in refused.stderr
    assert records(store_url) == before


def test_leader_exits_3_when_a_task_waits_for_a_person(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("ask", "needs a person"))
    lead = team_members(tmp_path, store_url, procs)
    code, output = finish(lead)
    assert code == 3, output
    assert "tenure inbox" in output
    assert records(store_url)["ask"].state == "blocked"


def test_a_bad_new_plan_changes_nothing(tmp_path: Path, store_url: str) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "second", depends_on=["a"]))
    spec = agent(tmp_path)
    first = tenure(tmp_path, "run", "plan.yaml", "--mode", "local", "--store", store_url,
                   "--exec", spec)
    assert first.returncode == 0, first.stdout + first.stderr
    before = records(store_url)
    write_plan(tmp_path / "bad.yaml", task("a", "first"), task("b", "x", depends_on=["ghost"]))
    refused = tenure(tmp_path, "replan", "bad.yaml", "--store", store_url)
    assert refused.returncode == 1
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "depends_on" in lines[0], refused.stderr
    assert records(store_url) == before
    assert events(store_url, "plan.update") == []


def test_fresh_starts_a_finished_plan_over_with_new_keys(tmp_path: Path, store_url: str) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "second"))
    spec = agent(tmp_path)
    run = ["run", "plan.yaml", "--mode", "local", "--store", store_url, "--exec", spec]
    first = tenure(tmp_path, *run)
    assert first.returncode == 0, first.stdout + first.stderr
    again = tenure(tmp_path, *run, "--fresh")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "starting over" in again.stdout and "2 done" in again.stdout
    found = records(store_url)
    assert {k: (r.state, r.attempt) for k, r in found.items()} == {
        "a": ("done", 2),
        "b": ("done", 2),
    }
    with open_store(store_url) as store:  # both attempts ran: none answered from the ledger
        for key in ("a:attempt-1", "a:attempt-2", "b:attempt-1", "b:attempt-2"):
            assert store.effect_lookup(TEAM, key) is not None, key
    assert dispatched(store_url, "a") == 2


def test_fresh_runs_a_changed_plan_from_the_start(tmp_path: Path, store_url: str) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("b", "second"))
    spec = agent(tmp_path)
    run = ["run", "plan.yaml", "--mode", "local", "--store", store_url, "--exec", spec]
    assert tenure(tmp_path, *run).returncode == 0
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("c", "another goal"))
    again = tenure(tmp_path, *run, "--fresh")
    assert again.returncode == 0, again.stdout + again.stderr
    found = records(store_url)
    assert sorted(found) == ["a", "c"]  # b belonged to the old plan only
    assert found["c"].result["artifact"]["goal"] == "another goal"
    rerun = tenure(tmp_path, *run)  # the new plan is now the team's: a re-run says so
    assert rerun.returncode == 0 and "already done" in rerun.stdout, rerun.stdout


@pytest.mark.parametrize("mode", ["--let-running-finish", "--cancel-running"])
def test_a_running_task_the_new_plan_changes_runs_again_with_its_new_goal(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]], mode: str
) -> None:
    gate = tmp_path / "gate"
    write_plan(tmp_path / "plan.yaml", task("slow", "the old goal", input={"gate": str(gate)}))
    write_plan(tmp_path / "new.yaml", task("slow", "the new goal"))
    lead = team_members(tmp_path, store_url, procs)
    wait_for(running(store_url, "slow"))
    shifted = tenure(
        tmp_path, "replan", "new.yaml", "--team", TEAM, "--store", store_url,
        "--reason", "goal shift", mode,
    )
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert "(leader lead)" in shifted.stdout
    gate.touch()
    code, output = finish(lead)
    assert code == 0, output
    found = records(store_url)["slow"]
    assert found.state == "done" and found.attempt == 2
    assert found.result["artifact"]["goal"] == "the new goal"
    with open_store(store_url) as store:
        first = store.effect_lookup(TEAM, "slow:attempt-1")
    if mode == "--let-running-finish":  # the old attempt ran to its end, and was kept
        assert first is not None and first.result["artifact"]["goal"] == "the old goal"
        assert [e["task_id"] for e in events(store_url, "replan.requeued")] == ["slow"]


def test_replan_a_nested_team_while_its_sub_leader_leads_it(
    tmp_path: Path, store_url: str
) -> None:
    """`tenure run` of a nested plan (signed: its keys are made for every team); the
    nested team acme/ops is replanned while its sub-leader process leads it."""
    child = "acme/ops"
    gate = tmp_path / "gate"
    (tmp_path / "plan.yaml").write_text(
        yaml.safe_dump(
            {
                "team": "acme",
                "tasks": [
                    {
                        "id": "ops",
                        "goal": "the nested work",
                        "team": {
                            "tasks": [
                                *old_plan(gate),
                            ]
                        },
                    }
                ],
            }
        )
    )
    (tmp_path / "new.yaml").write_text(
        yaml.safe_dump({"team": child, "tasks": list(new_plan(gate))})
    )
    spec = agent(tmp_path)
    run = start(
        tmp_path, "run", "plan.yaml", "--workers", "1", "--store", store_url, "--exec", spec
    )
    try:
        def slow_running() -> bool:
            with open_store(store_url) as store:
                return any(t.task_id == "slow" and t.state == "running" for t in store.tasks(child))

        wait_for(slow_running)
        shifted = tenure(
            tmp_path, "replan", "new.yaml", "--team", child, "--store", store_url,
            "--reason", "goal shift",
        )
        assert shifted.returncode == 0, shifted.stdout + shifted.stderr
        assert "(leader " in shifted.stdout  # the sub-leader applied it
        gate.touch()
        code, output = finish(run, timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert code == 0, output
    with open_store(store_url) as store:
        found = {t.task_id: t for t in store.tasks(child)}
        updates = [e for e in store.events(child, limit=1000) if e.kind == "plan.update"]
    assert found["keep"].state == "done"
    assert found["keep"].result["artifact"]["goal"] == "the new goal"
    assert found["drop"].state == "cancelled" and found["added"].state == "done"
    assert len(updates) == 1 and updates[0].data["dropped"] == ["drop"]
    assert records_of(store_url, "acme")["ops"].state == "done"


def records_of(store_url: str, team: str) -> dict[str, TaskRecord]:
    with open_store(store_url) as store:
        return {t.task_id: t for t in store.tasks(team)}


def test_a_signed_team_takes_a_replan_only_with_its_lead_key(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    """`tenure run` in team mode signs (its keys are in .tenure/keys): an unsigned request
    is refused by the leader and changes nothing; one signed with the lead key is taken."""
    gate = tmp_path / "gate"
    write_plan(tmp_path / "plan.yaml", *old_plan(gate))
    write_plan(tmp_path / "new.yaml", *new_plan(gate))
    spec = agent(tmp_path)
    run = start(tmp_path, "run", "plan.yaml", "--workers", "1", "--store", store_url, "--exec", spec)
    procs.append(run)
    wait_for(running(store_url, "slow"))
    unsigned = tenure(tmp_path, "replan", "new.yaml", "--store", store_url, "--insecure")
    assert unsigned.returncode == 1, unsigned.stdout + unsigned.stderr
    assert "is signed" in unsigned.stderr and "Traceback" not in unsigned.stderr
    with open_store(store_url) as store:  # refused before anything was written
        assert pending_request(store, TEAM, 1) is None
        forged = PlanRequest(  # one written into the store by someone without the key
            revision=2,
            plan=to_dict(load_plan(tmp_path / "new.yaml")),
            by="mallory",
            signature={"by": "lead", "sig": base64.b64encode(b"x" * 64).decode()},
        )
        assert write_request(store, TEAM, forged, epoch=store.current_epoch(TEAM))
    wait_for(lambda: bool(events(store_url, "security.replan_refused")))
    assert "added" not in records(store_url)  # the leader applied nothing of it
    signed = tenure(tmp_path, "replan", "new.yaml", "--store", store_url, "--reason", "goal shift")
    assert signed.returncode == 0, signed.stdout + signed.stderr
    assert "revision 3 (leader leader)" in signed.stdout
    gate.touch()
    code, output = finish(run)
    assert code == 0, output
    found = records(store_url)
    assert found["keep"].result["artifact"]["goal"] == "the new goal"
    assert found["drop"].state == "cancelled" and found["added"].state == "done"


def one_line(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


def test_replan_bad_input_is_one_line_and_changes_nothing(tmp_path: Path, store_url: str) -> None:
    write_plan(tmp_path / "plan.yaml", task("a", "first"))
    spec = agent(tmp_path)
    assert tenure(tmp_path, "run", "plan.yaml", "--mode", "local", "--store", store_url,
                  "--exec", spec).returncode == 0
    before = records(store_url)
    missing = one_line(tenure(tmp_path, "replan", "nope.yaml", "--store", store_url), 2)
    assert "nope.yaml" in missing
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({"team": "other", "tasks": [task("x", "y")]}))
    unknown = one_line(tenure(tmp_path, "replan", "other.yaml", "--store", store_url))
    assert "no team 'other'" in unknown
    nowhere = one_line(tenure(tmp_path, "replan", "plan.yaml", "--store", "sqlite:///gone/x.db"))
    assert "no store at" in nowhere and not (tmp_path / "gone").exists()
    wrong = one_line(tenure(tmp_path, "replan", "plan.yaml", "--team", "zzz", "--store", store_url))
    assert "--team zzz" in wrong
    write_plan(tmp_path / "typo.yaml", task("a", "first", options={"colour": "red"}))
    typo = one_line(tenure(tmp_path, "replan", "typo.yaml", "--store", store_url))
    assert "options.colour" in typo
    assert records(store_url) == before
    same = tenure(tmp_path, "replan", "plan.yaml", "--store", store_url)
    assert same.returncode == 0 and "nothing to change" in same.stdout, same.stdout + same.stderr


def test_a_request_left_pending_is_applied_by_the_next_leader_before_it_dispatches(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    """A replan asked of a leader that died before taking it: the next leader applies it
    in its first round, so the task it drops is never dispatched."""
    write_plan(tmp_path / "plan.yaml", task("a", "first"), task("drop", "unwanted"))
    plan = load_plan(tmp_path / "plan.yaml")
    with open_store(store_url) as store:  # the team as a dead leader left it
        epoch = store.claim_lease(TEAM, "dead-leader", 30.0, token=LEASE_TOKEN).epoch
        for entry in plan.tasks:
            store.create_task(TEAM, entry.id, epoch=epoch, spec=to_dict(spec_for(plan, entry)))
        first = Revision(revision=1, digest=plan_digest(plan), by="dead-leader")
        record_revision(store, TEAM, first, epoch=epoch)
        new = write_plan(tmp_path / "new.yaml", task("a", "first"), task("b", "second"))
        request = PlanRequest(revision=2, plan=to_dict(load_plan(new)), reason="b instead")
        assert write_request(store, TEAM, request, epoch=epoch)
        store.release_lease(TEAM, "dead-leader", epoch, token=LEASE_TOKEN)
    lead = team_members(tmp_path, store_url, procs)
    code, output = finish(lead)
    assert code == 0, output
    found = records(store_url)
    assert found["drop"].state == "cancelled" and dispatched(store_url, "drop") == 0
    assert found["a"].state == "done" and found["b"].state == "done"
    assert [e["revision"] for e in events(store_url, "plan.update")] == [2]


def test_cancel_running_stops_every_running_attempt_and_runs_the_kept_ones_again(
    tmp_path: Path, store_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    gate = tmp_path / "gate"
    kept = task("slow", "kept as it is", input={"gate": str(gate)})
    write_plan(tmp_path / "plan.yaml", kept)
    write_plan(tmp_path / "new.yaml", kept, task("extra", "one more"))
    lead = team_members(tmp_path, store_url, procs)
    wait_for(running(store_url, "slow"))
    shifted = tenure(
        tmp_path, "replan", "new.yaml", "--store", store_url, "--reason", "restart", "--cancel-running"
    )
    assert shifted.returncode == 0, shifted.stdout + shifted.stderr
    assert "slow: its running attempt cancelled" in shifted.stdout
    gate.touch()
    code, output = finish(lead)
    assert code == 0, output
    found = records(store_url)
    assert found["slow"].state == "done" and found["slow"].attempt == 2
    assert found["extra"].state == "done"
