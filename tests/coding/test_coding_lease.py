"""Real `tenure code` processes on one run: a second leader is refused while the lease is
live; a paused leader whose lease expired writes nothing after its successor took over;
a killed run whose state database is deleted is rebuilt from status.yml and finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from conftest import sigstop_between_writes, wipe_redis
from tenure.store import open_store

from .conftest import FAKE_AGENT, fix_task, sh
from .test_coding_store import epochs_in_log


def code_argv(repo: Path, tmp_path: Path, agents: dict[str, Any], *extra: str) -> list[str]:
    cfg = tmp_path / "agent.json"
    cfg.write_text(json.dumps(agents))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"tasks": [fix_task(1), fix_task(2)]}))
    agent = f"script:{sys.executable} {FAKE_AGENT} {cfg} {{task_file}} {{result_file}}"
    return [
        sys.executable, "-m", "tenure", "code", str(plan), "--repo", str(repo),
        "--agent", agent, "--run", "r1", "--workers", "1", *extra,
    ]  # fmt: skip


def wait_for(predicate: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def started(repo: Path) -> Callable[[], bool]:
    log = repo / ".tenure/attempts/r1/t1-1/agent.log"
    return lambda: log.exists() and "mode hang" in log.read_text()


def rows(repo: Path) -> dict[str, dict[str, Any]]:
    text = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/status.yml")
    return {r["id"]: r for r in yaml.safe_load(text)["tasks"]}


def test_a_second_leader_is_refused_then_a_killed_ones_lease_is_taken_at_once(
    repo: Path, tmp_path: Path
) -> None:
    agents = {"t1": {"file": "m1.py", "modes": ["hang", "fix"]}, "t2": {"file": "m2.py"}}
    agents["t2"]["modes"] = ["fix"]
    argv = code_argv(repo, tmp_path, agents)
    first = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(started(repo), "the first attempt never started")
        before = sh(repo, "rev-parse", "tenure/r1/integration")
        second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f":{first.pid} (epoch 1" in lines[0], second.stderr
        assert "already led by" in lines[0] and "Traceback" not in second.stderr
        assert sh(repo, "rev-parse", "tenure/r1/integration") == before  # it wrote nothing
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the leader dies holding its lease
        first.wait()
    # the dead holder (same host, no such process) cannot renew: its lease is taken over
    # (seized: only the dead process knew the token that would release it)
    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "(epoch 2)" in resumed.stdout
    assert rows(repo)["t1"]["attempt"] == 2
    with open_store(f"sqlite:///{repo / '.tenure' / 'state.db'}") as store:
        [seized] = [e for e in store.events("code/r1") if e.data.get("over_epoch") == 1]
    assert (seized.kind, seized.epoch) == ("lease.claimed", 2)
    assert str(seized.data["over_holder"]).endswith(f":{first.pid}")


def test_a_paused_leader_writes_nothing_after_its_lease_expired(repo: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    agents = {"t1": {"file": "m1.py", "modes": ["hang", "fix"]}, "t2": {"file": "m2.py"}}
    agents["t2"]["modes"] = ["fix"]
    argv = code_argv(repo, tmp_path, agents, "--store", url, "--lease-ttl", "2")
    pipe = subprocess.PIPE
    paused = subprocess.Popen(argv, start_new_session=True, stdout=pipe, stderr=pipe, text=True)
    try:
        wait_for(started(repo), "the first attempt never started")
        sigstop_between_writes(paused.pid, url)  # it alone stops, not the database
        with open_store(url) as store:  # the store's clock decides; no sleeping on ours
            wait_for(lambda: store.current_lease("code/r1") is None, "the lease never expired")
        successor = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert successor.returncode == 0, successor.stdout + successor.stderr
        assert "(epoch 2)" in successor.stdout
        tip = sh(repo, "rev-parse", "tenure/r1/integration")
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    out, err = paused.communicate(timeout=120)
    assert paused.returncode == 1, out + err
    assert "lost the lead of code/r1" in err and "Traceback" not in err
    # git: the woken leader committed nothing; every commit after epoch 2 began is epoch 2
    assert sh(repo, "rev-parse", "tenure/r1/integration") == tip
    epochs = epochs_in_log(repo)
    assert epochs == sorted(epochs) and epochs[-1] == 2
    # the store: it was refused, said so, and the successor's register stands
    with open_store(url) as store:
        kinds = [(e.kind, e.data.get("holder")) for e in store.events("code/r1")]
        assert ("code.lease_lost", f"{os.uname().nodename}:{paused.pid}") in kinds
        assert {t.task_id: t.state for t in store.tasks("code/r1")} == {"t1": "done", "t2": "done"}
    assert rows(repo)["t1"]["state"] == "merged"


def lose(url: str, tmp_path: Path) -> None:
    """The state database is gone: the SQLite file deleted, or the Redis database emptied."""
    if url.startswith("sqlite:"):
        for path in tmp_path.glob("state.db*"):
            path.unlink()
        return
    assert wipe_redis(url) > 0


def test_a_killed_run_whose_database_is_lost_is_rebuilt_from_git(
    repo: Path, tmp_path: Path, store_url: str
) -> None:
    agents = {"t1": {"file": "m1.py", "modes": ["fix"]}, "t2": {"file": "m2.py"}}
    agents["t2"]["modes"] = ["hang", "fix"]
    argv = code_argv(repo, tmp_path, agents, "--store", store_url)
    proc = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    log = repo / ".tenure/attempts/r1/t2-1/agent.log"
    try:
        wait_for(lambda: log.exists() and "mode hang" in log.read_text(), "t2 never started")
        # t1 runs beside t2: kill once its merge is committed, so the kill is mid-t2 only
        wait_for(lambda: rows(repo)["t1"]["state"] == "merged", "t1 was never merged")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert rows(repo)["t1"]["state"] == "merged"
    lose(store_url, tmp_path)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(epoch 2)" in done.stdout  # above the epoch status.yml recorded
    with open_store(store_url) as store:
        records = {t.task_id: t for t in store.tasks("code/r1")}
        assert {k: r.state for k, r in records.items()} == {"t1": "done", "t2": "done"}
        assert records["t1"].attempt == 1 and records["t2"].attempt == 2
        rebuilt = [e for e in store.events("code/r1") if e.kind == "code.rebuilt"]
        assert rebuilt and rebuilt[0].data["tasks"] == 2
    # nothing lost: the interrupted attempt's work is on its branch, both fixes merged
    assert "return 1" in sh(repo, "show", "tenure/r1/t2/1:m2.py")
    for i in (1, 2):
        assert "return 1" in sh(repo, "show", f"tenure/r1/integration:m{i}.py")
    assert "register rebuilt from status.yml" in sh(
        repo, "show", "tenure/r1/integration:.tenure/runs/r1/plan.md"
    )
