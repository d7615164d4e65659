"""The team as a whole outlives a store that stops answering for a while, and stops —
saying why, never how the run ended — when its store is replaced under it.

The stall is a SIGSTOP of a redis-server of the test's own (its data kept: a pause,
not a loss), longer than several lease TTLs and the client's socket timeout, so every
member sees its calls fail. Everything runs as real processes: ``tenure run`` and the
workers it starts, or ``tenure leader`` / ``tenure worker``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PrivateRedis, redis_or_skip, wipe_redis
from tenure.console.crew import STARTUP_SECONDS
from tenure.store.patient import OUTAGE_EVENT

from .harness import LEADER_TTL, Team, assert_run_safe, children_of, of_kind, running

pytestmark = pytest.mark.slow
STALL = 4 * LEADER_TTL + 1.0  # several TTLs, and past the URL's 1 s socket timeout
WAITING = "store unreachable since"
BACK = "store reachable again"


def _exit_of(team: Team, name: str, timeout: float) -> int:
    member = team.members[name]
    try:
        return member.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{name} did not exit in {timeout}s:\n{team.report()}") from None


def _log(team: Team, name: str) -> str:
    return team.members[name].log.read_text(encoding="utf-8", errors="replace")


def _tenure_log(url: str, team: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TENURE_STORE"}
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "log", "--store", url, "--team", team, "--limit", "5000"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("mode", ["team", "queue", "local"])
def test_a_run_rides_out_a_redis_stall_of_several_ttls(
    tmp_path: Path, private_redis: PrivateRedis, mode: str
) -> None:
    team = Team(tmp_path, private_redis.url)
    try:
        team.write_plan(12)
        run = team.run("--mode", mode, sleep="0.3-0.6")
        team.wait_for("three tasks done", lambda: team.done_count() >= 3, 60)
        private_redis.pause()
        paused = time.monotonic()
        try:
            time.sleep(STALL)
        finally:
            private_redis.resume()
        stalled = time.monotonic() - paused
        code = _exit_of(team, "run", 180)
        output = _log(team, "run")
        assert code == 0, team.report()
        tasks = team.store.tasks(team.name)
        assert {t.task_id: t.state for t in tasks} == dict.fromkeys(team.task_ids, "done")
        assert team.ledger().per_task() == dict.fromkeys(team.task_ids, 1)  # each effect once
        if mode != "queue":  # queue workers give their executor no store-claimed effects
            assert_run_safe(team, tasks)
        assert WAITING in output and BACK in output, output
        assert "Traceback" not in output
        outages = of_kind(team.events(), OUTAGE_EVENT)
        mine = [e for e in outages if e.data["member"] in ("leader", "run")]
        assert mine, team.report()
        assert all(e.data["end"] > e.data["start"] for e in outages)
        assert max(e.data["seconds"] for e in mine) <= stalled + 1.0
        assert OUTAGE_EVENT in _tenure_log(private_redis.url, team.name)
        if mode != "local":
            for member, text in team.member_logs().items():
                assert "Traceback" not in text, (member, text)
        assert not children_of(run.pid)
    finally:
        team.stop_all()
        team.close()


def test_a_leader_and_workers_ride_out_a_redis_stall_and_say_so(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    team = Team(tmp_path, private_redis.url)
    try:
        team.write_plan(10)
        team.start([("L1", 10)], workers=2, sleep="0.3-0.6")
        team.wait_for("two tasks done", lambda: team.done_count() >= 2, 60)
        private_redis.pause()
        try:
            time.sleep(STALL)
        finally:
            private_redis.resume()
        assert_run_safe(team, team.wait_settled(120))
        outages = {e.data["member"] for e in of_kind(team.events(), OUTAGE_EVENT)}
        assert outages == {"L1", "w1", "w2"}, team.report()
        for name in ("L1", "w1", "w2"):
            text = _log(team, name)
            assert text.count(WAITING) >= 1 and BACK in text and "Traceback" not in text, text
    finally:
        team.stop_all()
        team.close()


def test_a_leader_that_could_not_renew_stands_down_and_campaigns_again(
    tmp_path: Path, private_redis: PrivateRedis
) -> None:
    """After the stall its lease has run out on the store's clock: the leader steps down
    (never acting under the old lease) and is elected again above its old epoch."""
    team = Team(tmp_path, private_redis.url)
    try:
        team.write_plan(10)
        team.run(sleep="0.3-0.6")
        first = team.wait_event("leader.elected", 60, lambda e: True)
        team.wait_for("two tasks done", lambda: team.done_count() >= 2, 60)
        private_redis.pause()
        try:
            time.sleep(STALL)
        finally:
            private_redis.resume()
        assert _exit_of(team, "run", 180) == 0, team.report()
        events = team.events()
        assert first.epoch is not None
        down = [e for e in of_kind(events, "leader.stepped_down") if e.seq > first.seq]
        again = [e for e in of_kind(events, "leader.elected") if (e.epoch or 0) > first.epoch]
        assert down and again and down[0].seq < again[0].seq, team.report()
        # nothing written under the old epoch once the new one was granted
        granted = next(e for e in events if e.kind == "lease.claimed" and e.epoch == again[0].epoch)
        late = [
            e
            for e in events
            if e.seq > granted.seq and e.kind == "task.transition" and e.epoch == first.epoch
        ]
        assert late == [], late
    finally:
        team.stop_all()
        team.close()


def test_members_stop_when_redis_is_emptied_under_them(tmp_path: Path) -> None:
    team = Team(tmp_path, redis_or_skip())
    try:
        _emptied_under(team)
    finally:
        team.stop_all()
        team.close()


def _emptied_under(team: Team) -> None:
    team.write_plan(12)
    team.start([("L1", 10)], workers=2, sleep="0.3-0.6")
    team.wait_for("two tasks done", lambda: team.done_count() >= 2, 60)
    assert wipe_redis(team.url) > 0  # FLUSHALL of this store: its identity goes too
    for name in ("L1", "w1", "w2"):
        assert _exit_of(team, name, 30) == 4, team.report()
        text = _log(team, name)
        assert "was emptied" in text and "Traceback" not in text, text
    assert "leader L1 of" not in _log(team, "L1")  # it never says how the run ended


def _lose_file(path: Path, how: str) -> None:
    if how == "truncate":
        os.truncate(path, 0)
    elif how == "delete":
        path.unlink()
    else:  # another database renamed over it, as a restore from a backup would
        os.replace(_other_database(path), path)


def _other_database(path: Path) -> Path:
    """Another Tenure database beside ``path``, made ahead (it takes a process start),
    so that losing the file is one quick step while the run is still going."""
    other = path.with_name("other.db")
    if not other.exists():
        subprocess.run(
            [sys.executable, "-c", f"from tenure.store import open_store; open_store('{other}')"],
            check=True,
        )
    return other


@pytest.mark.parametrize("how", ["truncate", "delete", "replace"])
def test_a_run_whose_sqlite_file_is_lost_stops_without_reporting_success(
    tmp_path: Path, sqlite_url: str, how: str
) -> None:
    team = Team(tmp_path, sqlite_url)
    try:
        if how == "replace":
            _other_database(tmp_path / "state.db")
        team.write_plan(16)
        run = team.run(workers=2, sleep="0.5-0.8")
        team.wait_for("three tasks done", lambda: team.done_count() >= 3, 60)
        workers = children_of(run.pid)
        assert len(workers) == 2
        _lose_file(tmp_path / "state.db", how)
        code = _exit_of(team, "run", 60)
        output = _log(team, "run")
        assert code == 4, output
        assert "SQLite store" in output and "Traceback" not in output, output
        assert " done in " not in output and "finished" not in output, output
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, output
        for pid in workers:
            team.wait_for(f"worker {pid} to end", lambda pid=pid: not running(pid), 20)
    finally:
        team.stop_all()
        team.close()


def test_a_local_run_whose_sqlite_file_is_truncated_stops_without_a_summary(
    tmp_path: Path, sqlite_url: str
) -> None:
    team = Team(tmp_path, sqlite_url)
    try:
        team.write_plan(16)
        team.run("--mode", "local", workers=2, sleep="0.3-0.6")
        team.wait_for("three tasks done", lambda: team.done_count() >= 3, 60)
        os.truncate(tmp_path / "state.db", 0)
        code = _exit_of(team, "run", 60)
        output = _log(team, "run")
        assert code == 4, output
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "was truncated" in errors[0], output
        assert " done in " not in output and "Traceback" not in output, output
    finally:
        team.stop_all()
        team.close()


def test_a_leader_and_workers_stop_when_their_sqlite_file_is_truncated(
    tmp_path: Path, sqlite_url: str
) -> None:
    team = Team(tmp_path, sqlite_url)
    try:
        team.write_plan(16)
        team.start([("L1", 10)], workers=2, sleep="0.3-0.6")
        team.wait_for("three tasks done", lambda: team.done_count() >= 3, 60)
        os.truncate(tmp_path / "state.db", 0)
        for name in ("L1", "w1", "w2"):
            assert _exit_of(team, name, 30) == 4, team.report()
            text = _log(team, name)
            assert "was truncated" in text and "Traceback" not in text, text
        assert "leader L1 of" not in _log(team, "L1")  # it never says how the run ended
    finally:
        team.stop_all()
        team.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signalled_run_leaves_no_member_behind(team: Team, sig: signal.Signals) -> None:
    team.write_plan(8)
    run = team.run(workers=3, sleep="5")
    team.wait_for("three workers started", lambda: len(children_of(run.pid)) == 3, 60)
    workers = children_of(run.pid)
    team.wait_for("a task started", lambda: team.started(), 60)
    os.kill(run.pid, sig)
    code = _exit_of(team, "run", 30)
    assert code != 0, _log(team, "run")
    assert "Traceback" not in _log(team, "run")
    alive = {pid for pid in workers if running(pid)}
    assert alive == set(), f"members left running: {alive}"


def test_a_killed_run_takes_its_members_with_it(team: Team) -> None:
    """SIGKILL leaves the run no time: its members get SIGTERM from the kernel."""
    team.write_plan(8)
    run = team.run(workers=2, sleep="5")
    team.wait_for("two workers started", lambda: len(children_of(run.pid)) == 2, 60)
    workers = children_of(run.pid)
    os.kill(run.pid, signal.SIGKILL)
    run.popen.wait(timeout=10)
    for pid in workers:
        team.wait_for(f"member {pid} to end", lambda pid=pid: not running(pid), 20)


def test_a_run_says_why_its_workers_died_at_start_up(team: Team) -> None:
    """Both workers' keys are unreadable (the run itself needs only their public keys):
    each dies at start-up; the run names it, its last error line and its log, and stops."""
    from tenure.coord.credentials import init_team

    team.write_plan(4)
    init_team(team.keys, team.name, ["worker-1", "worker-2"])
    for member in ("worker-1", "worker-2"):
        (team.keys / team.name / "_members" / f"{member}.key").write_text("not a key\n")
    started = time.monotonic()
    team.run(workers=2)
    code = _exit_of(team, "run", 60)
    took = time.monotonic() - started
    output = _log(team, "run")
    assert code == 5, output
    for member in ("worker-1", "worker-2"):
        line = next(x for x in output.splitlines() if x.startswith(f"worker {member} exited"))
        assert "at start-up" in line and "is not a private key" in line, line
        log = line.rsplit("log: ", 1)[1]
        assert Path(log).is_file() and "is not a private key" in Path(log).read_text()
    assert "no worker is left" in output and "Traceback" not in output
    assert took < 30, f"the run took {took:.0f}s to notice"


def _member_id(pid: int) -> str:
    """The ``--member`` id a member process was started with."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return args[args.index(b"--member") + 1].decode()


@pytest.mark.parametrize("mode", ["team", "queue"])
def test_a_worker_killed_mid_run_is_started_again(team: Team, mode: str) -> None:
    """Past its start-up window a worker that dies is started again under its id once
    its last heartbeat lapsed (a live id is refused), the replacement joins and works,
    and the run ends well."""
    team.write_plan(60)
    started = time.monotonic()
    run = team.run("--mode", mode, workers=2, sleep="0.5-1.0")
    team.wait_for("two workers started", lambda: len(children_of(run.pid)) == 2, 60)
    team.wait_for(
        "the workers past their start-up",
        lambda: time.monotonic() - started > STARTUP_SECONDS + 1 and team.done_count() >= 2,
        60,
    )
    victim = min(children_of(run.pid))
    name = _member_id(victim)
    os.kill(victim, signal.SIGKILL)
    assert _exit_of(team, "run", 180) == 0, team.report()
    output = _log(team, "run")
    said = f"worker {name} exited with code -9 while running"
    assert said in output and "once its id is free" in output, output
    assert f"worker {name}: started again (1 of 2)" in output, output
    assert "is live in team" not in output and "at start-up" not in output, output
    assert "Traceback" not in output
    joined = [e for e in team.events() if e.kind == "member.joined" and e.data["member"] == name]
    assert len(joined) == 2, team.report()  # the first one, then its replacement
    replacement = [a for a in team.started() if a["worker"] == name and a["pid"] != victim]
    assert replacement, team.report()  # it took work
    tasks = team.store.tasks(team.name)
    assert {t.task_id: t.state for t in tasks} == dict.fromkeys(team.task_ids, "done")
    if mode == "team":
        assert_run_safe(team, tasks)
