"""Signals and what running members say, with real processes: SIGTERM on ``tenure run``
stops the workers it started (exit 143), Ctrl-C stops a run with a line (exit 130),
a worker says how it starts, each task it takes and ends, and that it stopped;
``tenure log -f`` prints events as they come and ends on Ctrl-C with exit 0."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenure.console.exits import Exit
from tenure.console.processes import STOP_GRACE
from tenure.protocol import load_plan
from tenure.roles import enqueue_plan
from tenure.store import open_store

SLEEPER = f"command:{sys.executable} -c 'import time; time.sleep(60)'"
QUICK = f"command:{sys.executable} -c 'print(1)'"


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("TENURE_STORE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(what: str, found: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found |= {int(each) for each in text}
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def running(url: str, team: str, task: str) -> bool:
    with open_store(url, create=False) as store:
        return any(t.task_id == task and t.state == "running" for t in store.tasks(team))


def test_sigterm_on_run_stops_the_workers_it_started(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        f'team: sig\ntasks:\n  - id: quick\n    goal: q\n    executor: "{QUICK}"\n'
        f"  - id: slow\n    goal: s\n    depends_on: [quick]\n"
    )
    url = f"sqlite:///{tmp_path / 'state.db'}"
    run = start(tmp_path, "run", "plan.yaml", "--store", url, "--insecure", "--exec", SLEEPER)
    try:
        wait_for(
            "the slow task to run",
            lambda: (tmp_path / "state.db").exists() and running(url, "sig", "slow"),
        )
        workers = children(run.pid)
        assert len(workers) == 2
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=30)
    finally:
        run.kill()
    assert run.returncode == Exit.TERMINATED == 143
    assert "SIGTERM: stopping 2 worker(s)…" in stderr
    assert "stopped by signal SIGTERM; every member it started was stopped" in stderr
    assert "Traceback" not in stderr
    assert not [pid for pid in workers if alive(pid)]
    logs = "\n".join(p.read_text() for p in sorted((tmp_path / ".tenure/logs/sig").glob("*.log")))
    assert re.search(r"^worker worker-\d joining team sig: store sqlite:///", logs, re.M)
    assert "executor " + SLEEPER + ", mode team" in logs
    assert "took quick (attempt 1)" in logs and "done quick in " in logs
    assert "took slow (attempt 1)" in logs
    assert "SIGTERM: stopping after the current step (at most 5 s" in logs
    assert ": stopped" in logs


def test_ctrl_c_on_run_says_what_it_stops_and_exits_130(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("team: int\ntasks:\n  - id: slow\n    goal: s\n")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    run = start(tmp_path, "run", "plan.yaml", "--store", url, "--insecure", "--exec", SLEEPER)
    try:
        wait_for(
            "the task to run",
            lambda: (tmp_path / "state.db").exists() and running(url, "int", "slow"),
        )
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=30)
    finally:
        run.kill()
    assert run.returncode == Exit.INTERRUPTED == 130
    assert "interrupted: stopping 2 worker(s)…" in stderr
    assert "tenure run: stopped (Ctrl-C)" in stderr and "Traceback" not in stderr


def test_the_worker_banner_shows_the_store_without_its_password(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-m", "tenure", "worker", "--team", "t", "--member", "w1", "--insecure"],
        env={**os.environ, "TENURE_STORE": "redis://user:s3cretpw@127.0.0.1:1/0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert worker.stdout is not None
        first = worker.stdout.readline().rstrip("\n")
        worker.send_signal(signal.SIGINT)
        rest, stderr = worker.communicate(timeout=30)
    finally:
        worker.kill()
    assert first == (
        "worker w1 joining team t: store redis://user:***@127.0.0.1:1/0, executor noop, mode team"
    )
    assert "s3cretpw" not in first + rest + stderr
    assert "worker w1: SIGINT: stopping after the current step (at most 5 s" in stderr


def test_log_follow_prints_new_events_until_ctrl_c(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        store.append_event("f", "first.thing", {"n": 1})
        follow = start(tmp_path, "log", "-f", "--json", "--store", url, "--team", "f")
        try:
            assert follow.stdout is not None
            first = json.loads(follow.stdout.readline())
            assert (first["kind"], first["data"]) == ("first.thing", {"n": 1})
            store.append_event("f", "second.thing", {"text": "with spaces"})
            store.append_event("other", "not.this.team", {})
            second = json.loads(follow.stdout.readline())
            assert (second["kind"], second["data"]) == ("second.thing", {"text": "with spaces"})
            follow.send_signal(signal.SIGINT)
            rest, stderr = follow.communicate(timeout=15)
        finally:
            follow.kill()
    assert follow.returncode == 0
    assert rest == ""
    assert stderr.strip() == "stopped following the log"


# --- a worker stops within its grace ------------------------------------------------------

IGNORES_CANCEL = "import time\n\ndef run(envelope, ctx):\n    time.sleep(60)\n    return 'late'\n"


def _events(url: str, team: str) -> list[str]:
    with open_store(url, create=False) as store:
        return [e.kind for e in store.events(team, limit=1000)]


def _busy_worker(
    tmp_path: Path, mode: str, executor: str, others: list[subprocess.Popen[str]]
) -> tuple[subprocess.Popen[str], str]:
    """A worker (and, in team mode, a leader, added to ``others``) with task t1 running
    in its executor."""
    (tmp_path / "ignores_cancel.py").write_text(IGNORES_CANCEL)
    (tmp_path / "plan.yaml").write_text("team: grace\ntasks:\n  - {id: t1, goal: wait}\n")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    if mode == "queue":
        with open_store(url) as store:
            enqueue_plan(store, load_plan(tmp_path / "plan.yaml"))
    else:
        others.append(
            start(tmp_path, "leader", "plan.yaml", "--store", url, "--insecure", "--keep-running")
        )
    extra = ["--queue"] if mode == "queue" else []
    worker = start(
        tmp_path, "worker", "-t", "grace", "--id", "w1", "--insecure", "--store", url,
        "--exec", executor, *extra,
    )  # fmt: skip
    wait_for("t1 to run", lambda: (tmp_path / "state.db").exists() and running(url, "grace", "t1"))
    return worker, url


def _stopped(worker: subprocess.Popen[str], *signals: signal.Signals) -> tuple[float, str]:
    """Send the signals (a second one a second after the first); seconds until it exited."""
    sent = time.monotonic()
    try:
        for n, sig in enumerate(signals):
            if n:
                time.sleep(1.0)
            worker.send_signal(sig)
        _, stderr = worker.communicate(timeout=30)
    finally:
        worker.kill()
    return time.monotonic() - sent, stderr


@pytest.mark.parametrize("mode", ["team", "queue"])
def test_a_worker_stops_a_cancellable_attempt_at_once_and_releases_it(
    tmp_path: Path, mode: str
) -> None:
    """``sleep:60`` sees ctx.cancelled: the worker is gone in well under its grace, the
    attempt is handed back (queued, its claim dropped), not failed."""
    leader: list[subprocess.Popen[str]] = []
    try:
        worker, url = _busy_worker(tmp_path, mode, "sleep:60", leader)
        took, stderr = _stopped(worker, signal.SIGTERM)
        assert worker.returncode == 0, stderr
        assert took < 3.0, f"took {took:.1f}s"
        assert "Traceback" not in stderr and "abandoned" not in stderr, stderr
        kinds = _events(url, "grace")
        said = "follower" if mode == "team" else "queue"
        assert {"effect.aborted", "member.left", f"{said}.attempt_released"} <= set(kinds)
        with open_store(url, create=False) as store:
            [task] = store.tasks("grace")
            assert (task.state, task.attempt, task.result) == ("queued", 1, None), task
            # (a leader then sends it to another worker: here there is none)
            assert store.effect_lookup("grace", "t1:attempt-1") is None  # nothing recorded
    finally:
        for each in leader:
            each.kill()
            each.communicate()  # its pipes closed too


@pytest.mark.parametrize(
    ("signals", "code", "said"),
    [
        ((signal.SIGTERM,), 0, "still busy 5 s after SIGTERM: stopping now"),
        ((signal.SIGTERM, signal.SIGTERM), 143, "SIGTERM again: stopping at once"),
        ((signal.SIGINT, signal.SIGINT), 130, "SIGINT again: stopping at once"),
    ],
)
def test_a_worker_abandons_what_ignores_its_stop(
    tmp_path: Path, signals: tuple[signal.Signals, ...], code: int, said: str
) -> None:
    """A function that never looks at ctx.cancelled: abandoned after the 5 s grace, or
    at once on a second signal; its claim lapses with the worker's heartbeat."""
    worker, url = _busy_worker(tmp_path, "queue", "python:ignores_cancel:run", [])
    took, stderr = _stopped(worker, *signals)
    assert worker.returncode == code, stderr
    assert said in stderr and "abandoned" in stderr and "Traceback" not in stderr, stderr
    if len(signals) == 1:
        assert STOP_GRACE <= took < STOP_GRACE + 3.0, f"took {took:.1f}s"
    else:
        assert took < 1.0 + 2.0, f"took {took:.1f}s"
    with open_store(url, create=False) as store:
        [task] = store.tasks("grace")
        assert task.state == "running" and task.result is None  # nothing half-written
        assert store.effect_lookup("grace", "t1:attempt-1") is None
        wait_for("its membership to lapse", lambda: not store.members("grace"), 10)


def test_a_local_run_stopped_by_sigterm_leaves_nothing_live_or_running(tmp_path: Path) -> None:
    """Its in-process workers release their attempts and leave on the way out; run again,
    it sends the same attempts (no attempt spent on the stop)."""
    (tmp_path / "plan.yaml").write_text(
        "team: loc\ntasks:\n  - {id: a, goal: a}\n  - {id: b, goal: b}\n"
    )
    url = f"sqlite:///{tmp_path / 'state.db'}"
    run = start(
        tmp_path, "run", "plan.yaml", "--store", url, "--mode", "local", "--exec", "sleep:60"
    )
    try:
        wait_for(
            "both to run",
            lambda: (
                (tmp_path / "state.db").exists()
                and all(running(url, "loc", task) for task in ("a", "b"))
            ),
        )
        took, stderr = _stopped(run, signal.SIGTERM)
    finally:
        run.kill()
    assert run.returncode == Exit.TERMINATED, stderr
    assert took < 5.0, f"took {took:.1f}s"
    with open_store(url, create=False) as store:
        assert store.members("loc") == []
        assert {t.task_id: (t.state, t.attempt) for t in store.tasks("loc")} == {
            "a": ("queued", 1),
            "b": ("queued", 1),
        }
    again = start(
        tmp_path, "run", "plan.yaml", "--store", url, "--mode", "local", "--exec", "sleep:0.1"
    )
    _, stderr = again.communicate(timeout=60)
    assert again.returncode == 0, stderr
    with open_store(url, create=False) as store:
        assert {t.task_id: (t.state, t.attempt) for t in store.tasks("loc")} == {
            "a": ("done", 1),
            "b": ("done", 1),
        }
