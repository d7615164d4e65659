"""Real OS processes for the fault scenarios: spawn, signal, wait, and read the evidence.

Every member is ``python -m tenure leader|worker ...`` in its own session, with
its output in a log file under the test's tmp_path. The evidence is the store's
event log (one store-wide order) and the LEDGER file the workers' executor
appends to (tests/faults/ledger_agent.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from conftest import sigstop_between_writes
from tenure.coord import LeaseTiming
from tenure.coord.credentials import init_team
from tenure.roles import LeaderConfig
from tenure.store import Event, Store, TaskRecord, open_store

from .ledger_agent import LEDGER_ENV, RETRY_SLEEP_ENV, SLEEP_ENV, STARTED_ENV

T = TypeVar("T")
FAULTS_DIR = Path(__file__).resolve().parent

# --- configured timing (every bound below is computed from these) ----------------------

LEADER_TTL = 1.5  # `tenure leader --ttl`
WORKER_TTL = 1.5  # `tenure worker --member-ttl`: liveness of a worker
TIMING = LeaseTiming(ttl=LEADER_TTL)  # what `--ttl` builds: renew every 0.3 x TTL
_DEFAULTS = LeaderConfig(team="-", member_id="-")  # what `tenure leader` leaves at default
ELECTION_BACKOFF = _DEFAULTS.election_backoff  # rank x this before a claim
CAMPAIGN_POLL = _DEFAULTS.poll_interval * 4  # a candidate looks at the lease this often
LEADER_POLL = _DEFAULTS.poll_interval  # an idle leader ticks this often
# Process scheduling and store round trips on a shared 2-core machine. Stated, not hidden.
SCHEDULING_SLACK = 1.0
TASK_DEADLINE = 30.0  # deadline_seconds of every plan task (also the effect claim time)

SETTLED = ("done", "blocked", "failed", "cancelled")
FENCED_KINDS = ("task.created", "task.transition", "effect.claimed")


def failover_bound(rank: int = 1) -> float:
    """Longest allowed time from killing (or pausing) the leader to the next
    ``leader.elected``, from the configured values:

    - the lease runs out at most TTL after its last renewal, which came before the kill;
    - one renew interval of allowance on top (a renewal in flight as the signal lands
      is the only way the store could see one later; strictly it is not needed);
    - a candidate notices the vacancy within one campaign poll;
    - it waits rank x backoff; the dead leader may still be listed live (its
      membership outlives its lease), so the next candidate is rank 1;
    - plus SCHEDULING_SLACK for process scheduling and store round trips.

    With TTL 1.5 s: 1.5 + 0.45 + 0.2 + 0.5 + 1.0 = 3.65 s. Without the two allowances
    it is 2.2 s; the runs measured 1.6-2.1 s.
    """
    return (
        TIMING.ttl + TIMING.renew_every + CAMPAIGN_POLL + rank * ELECTION_BACKOFF + SCHEDULING_SLACK
    )


def stale_worker_bound() -> float:
    """Longest allowed time from SIGKILL of a worker to the leader's ``task.retry``:
    its membership lapses at most WORKER_TTL after its last heartbeat, and an idle
    leader supervises every tick."""
    return WORKER_TTL + LEADER_POLL + SCHEDULING_SLACK


@dataclass
class Member:
    name: str
    role: str
    popen: subprocess.Popen[bytes]
    log: Path
    stopped: bool = False
    may_fail: bool = False  # refused at start by design: its exit is the evidence

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass
class Ledger:
    lines: list[dict[str, Any]] = field(default_factory=list)

    def per_task(self) -> Counter[str]:
        return Counter(line["task_id"] for line in self.lines)

    def of(self, task_id: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["task_id"] == task_id]


class Team:
    """One team under test: its plan, its member processes, its store and its ledger."""

    def __init__(self, tmp_path: Path, store_url: str) -> None:
        self.dir = tmp_path
        self.url = store_url
        self.name = f"faults-{uuid.uuid4().hex[:8]}"
        self.ledger_path = tmp_path / "ledger.jsonl"
        self.started_path = tmp_path / "started.jsonl"
        self.plan_path = tmp_path / "plan.yaml"
        self.task_ids: list[str] = []
        self.members: dict[str, Member] = {}
        self.store: Store = open_store(store_url)
        self.keys = tmp_path / "keys"  # every member signs: the faults run with credentials on

    # --- the plan ---------------------------------------------------------------------

    def write_plan(self, tasks: int, *, deadline: float = TASK_DEADLINE) -> list[str]:
        self.task_ids = [f"t{n:02d}" for n in range(1, tasks + 1)]
        schema = {
            "type": "object",
            "required": ["task_id", "ledger"],
            "properties": {"ledger": {"type": "object", "required": ["task_id", "epoch"]}},
        }
        plan = {
            "team": self.name,
            "goal": "append one ledger line per task, whatever happens to the team",
            "max_attempts": 4,
            "tasks": [
                {
                    "id": task_id,
                    "goal": f"record {task_id} in the ledger",
                    "acceptance_criteria": [f"the ledger has exactly one line for {task_id}"],
                    "deadline_seconds": deadline,
                    "output_schema": schema,
                }
                for task_id in self.task_ids
            ],
        }
        self.plan_path.write_text(yaml.safe_dump(plan), encoding="utf-8")
        return self.task_ids

    # --- processes --------------------------------------------------------------------

    def _spawn(self, name: str, role: str, args: list[str], env: dict[str, str]) -> Member:
        assert name not in self.members, f"{name} spawned twice"
        log = self.dir / f"{name}.log"
        python_path = os.pathsep.join(
            p for p in (str(FAULTS_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path, **env}
        full_env.pop("TENURE_STORE", None)
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "tenure", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=full_env,
                cwd=self.dir,
            )
        member = Member(name, role, popen, log)
        self.members[name] = member
        return member

    def leader(self, name: str, priority: int, *flags: str) -> Member:
        args = [
            "leader",
            str(self.plan_path),
            "--store",
            self.url,
            "--member",
            name,
            "--priority",
            str(priority),
            "--ttl",
            str(LEADER_TTL),
            "--state-dir",
            str(self.dir / "state" / name),
            "--keys",
            str(self.keys),
            *flags,
        ]
        init_team(self.keys, self.name)
        return self._spawn(name, "leader", args, {})

    def worker(
        self,
        name: str,
        *flags: str,
        sleep: str = "0.2-0.6",
        retry_sleep: str | None = None,
        member_id: str | None = None,
        executor: str = "python:ledger_agent:run",
        may_fail: bool = False,
    ) -> Member:
        """A worker process called ``name`` (its ``--id`` too, unless ``member_id``)."""
        args = [
            "worker",
            "--store",
            self.url,
            "--team",
            self.name,
            "--member",
            member_id or name,
            "--exec",
            executor,
            "--member-ttl",
            str(WORKER_TTL),
            "--state-dir",
            str(self.dir / "state" / name),
            "--keys",
            str(self.keys),
            *flags,
        ]
        init_team(self.keys, self.name, [member_id or name])
        env = {
            LEDGER_ENV: str(self.ledger_path),
            STARTED_ENV: str(self.started_path),
            SLEEP_ENV: sleep,
            RETRY_SLEEP_ENV: retry_sleep or sleep,
        }
        member = self._spawn(name, "worker", args, env)
        member.may_fail = may_fail
        return member

    def run(
        self, *flags: str, name: str = "run", workers: int = 3, sleep: str = "0.2-0.6"
    ) -> Member:
        """``tenure run PLAN`` with ``workers`` worker processes of the ledger executor;
        its own output (the live table, its stderr lines) in ``<name>.log``, its members'
        under ``state/<name>/logs``."""
        args = [
            "run",
            str(self.plan_path),
            "--store",
            self.url,
            "--workers",
            str(workers),
            "--exec",
            "python:ledger_agent:run",
            "--ttl",
            str(LEADER_TTL),
            "--state-dir",
            str(self.dir / "state" / name),
            "--keys",
            str(self.keys),
            *flags,
        ]
        env = {
            LEDGER_ENV: str(self.ledger_path),
            STARTED_ENV: str(self.started_path),
            SLEEP_ENV: sleep,
            RETRY_SLEEP_ENV: sleep,
            "COLUMNS": "200",
        }
        return self._spawn(name, "run", args, env)

    def member_logs(self, name: str = "run") -> dict[str, str]:
        """The logs of the members a ``tenure run`` called ``name`` started, by member."""
        folder = self.dir / "state" / name / "logs"
        return {
            path.stem: path.read_text(encoding="utf-8", errors="replace")
            for path in sorted(folder.rglob("*.log"))
        }

    def signal(self, name: str, sig: signal.Signals) -> float:
        """Send ``sig`` to one member; returns the wall-clock time it was sent."""
        member = self.members[name]
        assert member.popen.poll() is None, f"{name} already exited:\n{self.report()}"
        if sig == signal.SIGSTOP:  # a pause of the member, never of the SQLite database
            member.stopped = True
            return sigstop_between_writes(member.pid, self.url)
        sent = time.time()
        os.kill(member.pid, sig)
        if sig == signal.SIGCONT:
            member.stopped = False
        elif sig == signal.SIGKILL:
            member.popen.wait(timeout=10)
        return sent

    def stop_all(self) -> None:
        """SIGCONT every member (a paused one cannot die gracefully), SIGTERM, then SIGKILL."""
        alive = [m for m in self.members.values() if m.popen.poll() is None]
        for member in alive:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(member.pid, sig)
                except ProcessLookupError:
                    break
        deadline = time.monotonic() + 3.0
        for member in alive:
            try:
                member.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.popen.kill()
                member.popen.wait()

    def close(self) -> None:
        self.store.close()

    def start(
        self,
        leaders: list[tuple[str, int]],
        workers: int,
        *,
        leader_flags: tuple[str, ...] = (),
        worker_flags: tuple[str, ...] = (),
        sleep: str = "0.2-0.6",
        retry_sleep: str | None = None,
    ) -> Event:
        """Start a team so that the first leader listed surely leads first: it alone, until
        elected; then the other candidates, until they are live members; then the workers
        (so no task is done before every candidate stands by). Returns its election."""
        (first, priority), *others = leaders
        self.leader(first, priority, *leader_flags)
        elected = self.wait_event("leader.elected", 30, lambda e: e.data.get("leader") == first)
        for name, rank in others:
            self.leader(name, rank, *leader_flags)
        names = {name for name, _ in others}
        self.wait_for("the other candidates to join", lambda: names <= self.live_members(), 30)
        for n in range(1, workers + 1):
            self.worker(f"w{n}", *worker_flags, sleep=sleep, retry_sleep=retry_sleep)
        return elected

    def next_election(self, after: Event, timeout: float) -> Event:
        """The first ``leader.elected`` at an epoch above ``after``'s."""
        assert after.epoch is not None
        old = after.epoch
        return self.wait_event("leader.elected", timeout, lambda e: (e.epoch or 0) > old)

    def grant_of(self, elected: Event) -> Event:
        """The store's own ``lease.claimed`` event behind an election."""
        return next(
            e for e in self.events() if e.kind == "lease.claimed" and e.epoch == elected.epoch
        )

    # --- waiting ----------------------------------------------------------------------

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float) -> T:
        """Poll ``probe`` until it returns something truthy; fail with the logs if not."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            self._fail_if_a_member_crashed(what)
            time.sleep(0.05)

    def wait_event(
        self, kind: str, timeout: float, where: Callable[[Event], bool] = lambda e: True
    ) -> Event:
        def probe() -> Event | None:
            return next((e for e in self.events() if e.kind == kind and where(e)), None)

        return self.wait_for(f"event {kind}", probe, timeout)

    def wait_settled(self, timeout: float) -> list[TaskRecord]:
        """Every plan task registered and out of queued/running/review."""

        def probe() -> list[TaskRecord] | None:
            tasks = self.store.tasks(self.name)
            if len(tasks) == len(self.task_ids) and all(t.state in SETTLED for t in tasks):
                return tasks
            return None

        return self.wait_for("every task to settle", probe, timeout)

    def done_count(self) -> int:
        return sum(t.state == "done" for t in self.store.tasks(self.name))

    def live_members(self) -> set[str]:
        return {m.member_id for m in self.store.members(self.name)}

    def _fail_if_a_member_crashed(self, what: str) -> None:
        for member in self.members.values():
            code = member.popen.poll()
            if code not in (None, 0, -signal.SIGKILL) and not member.may_fail:
                raise AssertionError(f"{member.name} exited with {code} while waiting for {what}")

    # --- evidence ---------------------------------------------------------------------

    def events(self) -> list[Event]:
        found: list[Event] = []
        while True:
            page = self.store.events(self.name, after=found[-1].seq if found else 0, limit=1000)
            found.extend(page)
            if len(page) < 1000:
                return found

    def ledger(self) -> Ledger:
        if not self.ledger_path.exists():
            return Ledger()
        text = self.ledger_path.read_text(encoding="utf-8")
        return Ledger([json.loads(line) for line in text.splitlines() if line.strip()])

    def started(self) -> list[dict[str, Any]]:
        if not self.started_path.exists():
            return []
        text = self.started_path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def report(self) -> str:
        """Everything a person needs when a scenario fails: logs, register, events."""
        parts = [f"team {self.name} on {self.url}"]
        for member in self.members.values():
            state = member.popen.poll()
            text = (
                member.log.read_text(encoding="utf-8", errors="replace")
                if member.log.exists()
                else ""
            )
            parts.append(
                f"----- {member.name} ({member.role}, pid {member.pid}, exit {state}) -----\n"
                + text[-4000:]
            )
        try:
            parts.append("----- register -----")
            for task in self.store.tasks(self.name):
                parts.append(
                    f"{task.task_id} {task.state} attempt={task.attempt} epoch={task.epoch}"
                    f" assignee={task.assignee} reason={task.reason[:120]!r}"
                )
            parts.append("----- events (last 150) -----")
            for event in self.events()[-150:]:
                parts.append(
                    f"{event.seq} {event.at:.3f} e={event.epoch} {event.kind} {event.data}"
                )
        except Exception as exc:  # the report must not hide the original failure
            parts.append(f"(store unreadable: {exc})")
        parts.append("----- ledger -----")
        parts.extend(json.dumps(line) for line in self.ledger().lines)
        return "\n".join(parts)


# --- the claims every scenario makes --------------------------------------------------


def epoch_timeline(events: Iterable[Event]) -> list[tuple[Event, int]]:
    """Each event with the team's epoch just before it (the highest granted so far)."""
    current, out = 0, []
    for event in events:
        out.append((event, current))
        if event.kind == "lease.claimed" and event.epoch is not None:
            current = max(current, event.epoch)
    return out


def assert_run_safe(team: Team, tasks: list[TaskRecord]) -> Ledger:
    """Every task done (or blocked with a reason), its effect exactly once, under a current epoch."""
    assert {t.task_id for t in tasks} == set(team.task_ids)
    for task in tasks:
        assert task.state == "done" or (task.state == "blocked" and task.reason), (
            f"{task.task_id} is {task.state}: {task.reason!r}"
        )

    ledger = team.ledger()
    counts = ledger.per_task()
    wrong = {
        t.task_id: counts[t.task_id]
        for t in tasks
        if counts[t.task_id] != 1 and not (t.state == "blocked" and counts[t.task_id] == 0)
    }
    assert wrong == {}, f"effects not exactly once per task (task: lines): {wrong}"
    assert set(counts) <= set(team.task_ids), f"ledger has unknown tasks: {set(counts)}"
    done = [t for t in tasks if t.state == "done"]

    # the accepted artifact is the record of the one effect, not a second run's
    for task in done:
        assert task.result is not None
        [line] = ledger.of(task.task_id)
        assert task.result["artifact"]["ledger"] == line, (task.task_id, task.result, line)

    events = team.events()
    assert_no_stale_writes(events)
    assert_effects_claimed_at_current_epoch(events, ledger)
    assert_finish_announced_by_current_leader(events)
    return ledger


def assert_no_stale_writes(events: list[Event]) -> None:
    """No fenced write was accepted under an epoch older than the team's at that point."""
    stale = [
        f"seq {e.seq} {e.kind} epoch {e.epoch} < current {current}: {e.data}"
        for e, current in epoch_timeline(events)
        if e.kind in FENCED_KINDS and e.epoch is not None and e.epoch < current
    ]
    assert stale == [], "stale writes accepted:\n" + "\n".join(stale)


def assert_effects_claimed_at_current_epoch(events: list[Event], ledger: Ledger) -> None:
    """Each ledger line was authorised by a claim of its task's ledger effect at the
    line's epoch, and that epoch was the team's current one when the claim was made."""
    claims = [
        (e, current)
        for e, current in epoch_timeline(events)
        if e.kind == "effect.claimed" and str(e.data.get("key", "")).endswith(":ledger")
    ]
    for line in ledger.lines:
        key = f"{line['task_id']}:ledger"
        matching = [
            (e, current)
            for e, current in claims
            if e.data.get("key") == key
            and e.epoch == line["epoch"]
            and e.data.get("holder", line["worker"]) == line["worker"]
        ]
        assert matching, f"ledger line without a matching effect claim: {line}"
        for e, current in matching:
            assert e.epoch is not None and e.epoch >= current, (
                f"{key} claimed at epoch {e.epoch} while the team was at {current}"
            )


def assert_finish_announced_by_current_leader(events: list[Event]) -> None:
    """``leader.plan_settled`` comes only from the holder of the newest epoch, at that epoch:
    a leader that wakes from a pause to a plan its successor finished must not claim it."""
    holders: dict[int, str] = {}
    for e, current in epoch_timeline(events):
        if e.kind == "lease.claimed" and e.epoch is not None:
            holders[e.epoch] = str(e.data.get("holder"))
        elif e.kind == "leader.plan_settled":
            who = e.data.get("leader")
            assert e.epoch == current and holders.get(current) == who, (
                f"seq {e.seq}: {who} announced the finish at epoch {e.epoch}, "
                f"but epoch {current} belongs to {holders.get(current)}"
            )


def of_kind(events: Iterable[Event], kind: str, **data: Any) -> list[Event]:
    return [
        e for e in events if e.kind == kind and all(e.data.get(k) == v for k, v in data.items())
    ]


# --- processes, read from /proc --------------------------------------------------------


def children_of(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (read from /proc: no psutil)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended while we looked
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"
