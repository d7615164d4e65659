"""Oversized, deep and malformed input against real member processes, on SQLite and Redis:
nothing crashes, wedges or half-writes the team.

- a task whose executor prints 20 MB is a failed attempt saying so, and the same
  worker process goes on to the next task;
- a poisoned message (100,000 levels deep, or not JSON at all) written straight into
  the leader's and a worker's queue is dead-lettered, visible with
  ``tenure dead-letters``, and both members keep running and finish the plan;
- a plan with a 1 MB goal is refused in one line with a non-zero exit by ``tenure run``
  and ``tenure leader``, and registers nothing;
- a YAML alias bomb is refused while using little memory;
- a leader killed (SIGKILL) while it registers a plan of ``MAX_TASKS`` tasks leaves
  every task registered or none.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from poison import POISONS, inject
from tenure.protocol.limits import MAX_FIELD_BYTES, MAX_RESULT_BYTES, MAX_TASKS
from tenure.roles import LEADER_QUEUE
from tenure.roles.member import member_queue
from tenure.store import Store, open_store
from tenure.store.url import sqlite_path

T = TypeVar("T")
TESTS_DIR = Path(__file__).resolve().parent.parent

AGENT = """\
import json, sys
env = json.load(sys.stdin)
if env["task_id"] == "big":
    sys.stdout.write(json.dumps({"status": "completed", "artifact": "x" * (20 * 1024 * 1024)}))
else:
    print(json.dumps({"done": env["task_id"]}))
"""


class Members:
    """``python -m tenure ...`` processes of one test, each with a log; all end at teardown."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        self.dir, self.url = tmp_path, url
        self.team = f"sizes-{uuid.uuid4().hex[:8]}"
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        self.store: Store = open_store(url)

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.dir / f"{name}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "COLUMNS": "200"}
        env.pop("TENURE_STORE", None)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tenure", *args, "--store", self.url],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.dir,
                env=env,
            )
        self.procs[name] = (proc, log)
        return proc

    def leader(self, plan: Path, *flags: str) -> subprocess.Popen[bytes]:
        state = str(self.dir / "state-leader")
        return self.start(
            "leader", "leader", str(plan), "--member", "lead-1", "--ttl", "2", "--insecure",
            "--state-dir", state, *flags,
        )  # fmt: skip

    def worker(self, name: str, executor: str) -> subprocess.Popen[bytes]:
        state = str(self.dir / f"state-{name}")
        return self.start(
            name, "worker", "--team", self.team, "--member", name, "--exec", executor,
            "--insecure", "--member-ttl", "2", "--state-dir", state,
        )  # fmt: skip

    def log(self, name: str) -> str:
        return self.procs[name][1].read_text(encoding="utf-8", errors="replace")

    def alive(self, name: str) -> bool:
        return self.procs[name][0].poll() is None

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
        deadline = time.monotonic() + timeout
        while True:
            found = probe()
            if found:
                return found
            for name, (proc, _) in self.procs.items():
                if proc.poll() not in (None, 0):
                    raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}\n{self.log(n)[-3000:]}" for n in self.procs)
                raise AssertionError(f"timed out waiting for {what}\n{logs}")
            time.sleep(0.05)

    def states(self) -> dict[str, str]:
        return {t.task_id: t.state for t in self.store.tasks(self.team)}

    def stop(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.store.close()


@pytest.fixture
def members(store_url: str, tmp_path: Path) -> Iterator[Members]:
    team = Members(tmp_path, store_url)
    try:
        yield team
    finally:
        team.stop()


def write_plan(path: Path, team: str, tasks: list[dict[str, object]], **extra: object) -> Path:
    path.write_text(yaml.safe_dump({"team": team, "tasks": tasks, **extra}), encoding="utf-8")
    return path


def tenure(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
    env.pop("TENURE_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:")
    return lines[0]


# --- 20 MB of output ------------------------------------------------------------------


def test_a_20_mb_output_is_a_failed_attempt_and_the_worker_runs_the_next_task(
    members: Members, tmp_path: Path
) -> None:
    """One worker: it gets ``big`` first (register order), then ``small``."""
    (tmp_path / "agent.py").write_text(AGENT)
    plan = write_plan(
        tmp_path / "plan.yaml",
        members.team,
        [
            {"id": "big", "goal": "print far too much", "max_attempts": 1},
            {"id": "small", "goal": "print a little"},
        ],
    )
    members.leader(plan, "--keep-running")
    worker = members.worker("w1", f"command:{sys.executable} {tmp_path / 'agent.py'}")
    members.wait_for(
        "both tasks to settle", lambda: members.states() == {"big": "blocked", "small": "done"}
    )
    big = members.store.get_task(members.team, "big")
    assert "stdout was 20.0 MiB (20,971,5" in big.reason, big.reason
    assert f"the limit is 252 KiB ({MAX_RESULT_BYTES:,} bytes)" in big.reason
    small = members.store.get_task(members.team, "small")
    sent = [e.data for e in members.store.events(members.team) if e.kind == "task.dispatched"]
    assert [(d["task_id"], d["assignee"]) for d in sent] == [("big", "w1"), ("small", "w1")]
    assert small.result is not None and small.result["artifact"] == {"done": "small"}
    assert worker.poll() is None and members.alive("leader")
    assert "Traceback" not in members.log("w1") + members.log("leader")


# --- poisoned queues ------------------------------------------------------------------


@pytest.mark.parametrize("poison", ["deep", "garbage"])
def test_a_poisoned_message_is_dead_lettered_and_the_members_keep_running(
    members: Members, tmp_path: Path, poison: str
) -> None:
    """Written before the members start: a leader starting on a poisoned queue, and a
    worker whose first message is poison, both carry on."""
    (tmp_path / "agent.py").write_text(AGENT)
    plan = write_plan(
        tmp_path / "plan.yaml",
        members.team,
        [{"id": f"t{n}", "goal": f"task {n}"} for n in range(3)],
    )
    raw = POISONS[poison]
    to_leader = inject(members.store, members.team, LEADER_QUEUE, raw)
    to_worker = inject(members.store, members.team, member_queue("w1"), raw)
    members.leader(plan, "--keep-running")
    members.worker("w1", f"command:{sys.executable} {tmp_path / 'agent.py'}")

    def dead() -> set[str] | None:
        found = {d.message_id for d in members.store.dead_letters(members.team)}
        return found if {to_leader, to_worker} <= found else None

    members.wait_for("both poisoned messages to be dead-lettered", dead)
    members.wait_for(
        "the plan to be done", lambda: set(members.states().values()) == {"done"} or None
    )
    assert members.alive("leader") and members.alive("w1")
    listed = tenure(
        tmp_path, "dead-letters", "--team", members.team, "--store", members.url, "--json"
    )
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["dead_letters"]
    assert {r["message_id"] for r in rows} >= {to_leader, to_worker}
    assert all(
        r["problem"] and r["payload"] == {}
        for r in rows
        if r["message_id"] in (to_leader, to_worker)
    )
    shown = tenure(tmp_path, "dead-letters", "--team", members.team, "--store", members.url)
    assert shown.returncode == 0 and "(undecodable)" in shown.stdout, shown.stdout
    for name in ("leader", "w1"):
        assert "Traceback" not in members.log(name)


# --- a 1 MB goal ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["plan", "task"])
def test_a_1_mb_goal_is_refused_in_one_line_by_run_and_leader(
    store_url: str, tmp_path: Path, where: str
) -> None:
    goal = "g" * (1024 * 1024)
    team = f"sizes-{uuid.uuid4().hex[:8]}"
    task = {"id": "t", "goal": goal if where == "task" else "fine"}
    write_plan(
        tmp_path / "plan.yaml", team, [task], **({"goal": goal} if where == "plan" else {})
    )
    field = "tasks[0].goal" if where == "task" else "goal"
    expected = f"plan.yaml: {field}: 1,048,576 bytes; the limit is {MAX_FIELD_BYTES:,}"
    for args in (
        ("run", "plan.yaml", "--store", store_url, "--workers", "1"),
        ("leader", "plan.yaml", "--store", store_url, "--insecure"),
    ):
        line = one_error_line(tenure(tmp_path, *args))
        assert expected in line, line
    with open_store(store_url) as store:
        assert store.tasks(team) == []


# --- a YAML bomb ----------------------------------------------------------------------


def test_a_yaml_alias_bomb_is_refused_with_little_memory(store_url: str, tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    lines += ["team: bomb", "tasks: [{id: t, goal: *a8}]"]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
    assert (tmp_path / "bomb.yaml").stat().st_size < 1000  # 9^9 strings, once expanded
    line = one_error_line(tenure(tmp_path, "run", "bomb.yaml", "--store", store_url))
    assert "bomb.yaml: line 6: " in line and "with its aliases expanded" in line, line
    # the same command again, under a parent of its own that reports its child's peak
    measure = (
        "import resource, subprocess, sys; "
        "subprocess.run(sys.argv[1:], capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    argv = [sys.executable, "-m", "tenure", "run", "bomb.yaml", "--store", store_url]
    peak = subprocess.run(
        [sys.executable, "-c", measure, *argv], cwd=tmp_path, capture_output=True, text=True
    )
    peak_kib = int(peak.stdout.strip())
    assert peak_kib < 300 * 1024, f"the refusal took {peak_kib:,} KiB"


# --- a large plan, killed while it loads ----------------------------------------------


def _in_long_write(url: str) -> bool:
    """The SQLite write lock held at two looks 20 ms apart: a long write transaction."""
    if not _write_lock_held(url):
        return False
    time.sleep(0.02)
    return _write_lock_held(url)


def _write_lock_held(url: str) -> bool:
    conn = sqlite3.connect(sqlite_path(url), timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


@pytest.mark.parametrize("trial", range(3))
def test_a_leader_killed_while_registering_a_large_plan_leaves_all_or_none(
    members: Members, tmp_path: Path, trial: int
) -> None:
    tasks = [{"id": f"t{n:05d}", "goal": f"task {n} of a large plan"} for n in range(MAX_TASKS)]
    plan = write_plan(tmp_path / "plan.yaml", members.team, tasks)
    leader = members.leader(plan, "--keep-running")
    members.wait_for(
        "the leader's election",
        lambda: any(e.kind == "leader.elected" for e in members.store.events(members.team)),
    )
    if members.url.startswith("sqlite:"):
        members.wait_for(
            "the registration's write transaction", lambda: _in_long_write(members.url), 120
        )
    else:
        time.sleep(random.uniform(0.0, 1.5))  # somewhere in building or sending the batch
    os.killpg(leader.pid, signal.SIGKILL)
    leader.wait(timeout=10)
    count = len(members.store.tasks(members.team))
    created = sum(e.kind == "task.created" for e in members.store.events(members.team, limit=10**6))
    assert count in (0, MAX_TASKS), f"{count} of {MAX_TASKS} tasks registered"
    assert created == count
