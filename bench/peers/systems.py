"""The systems under test. Each starts N worker processes on its own Redis DB, warms
them up, enqueues no-op tasks one by one from this process, and knows how to see
a task's completion recorded in Redis.

Lifecycle of one measured run (see ``run.py``)::

    claim_db(); start(); warm_up(); prepare(n)     # not timed
    t0; submit(); tracker().wait() -> t1           # timed: first enqueue .. last completion
    finish(); stop(); release_db()                 # not timed (release flushes the DB)
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from common import (
    PYTHON,
    TRACKER_NAME,
    BenchError,
    Tracker,
    check_alive,
    client,
    redis_url,
    spawn,
    stop,
    wait_until,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: _slots
from _slots import concurrency_flags  # noqa: E402

READY_KEY = "bench:ready"


@dataclass
class Options:
    workers: int
    run_dir: Path
    timeout: float = 300.0
    warm_tasks: int = 50
    dramatiq_worker_timeout_ms: int = 100
    slots: int = 1
    """Tasks one worker process runs at once (Celery threads, Dramatiq threads, Tenure
    ``--concurrency`` when the build has it); 1 is the no-op benchmark's setting."""
    sleep: float = 0.0
    """Seconds each task waits (``time.sleep``); 0 is a no-op task."""
    signed: bool = True
    """Tenure signs envelopes and results, as ``tenure run`` does (keys made per run)."""


@dataclass
class System:
    opts: Options
    db: int
    procs: list[Any] = field(default_factory=list)

    name: ClassVar[str] = ""
    how: ClassVar[str] = ""
    completion: ClassVar[str] = ""

    @property
    def url(self) -> str:
        return redis_url(self.db)

    @property
    def workers(self) -> int:
        return self.opts.workers

    def log(self, what: str) -> Path:
        return self.opts.run_dir / f"{self.name}-w{self.workers}-{what}.log"

    def alive(self) -> None:
        check_alive(self.procs, self.name)

    # --- lifecycle (overridden) --------------------------------------------------------

    def start(self) -> None:
        raise NotImplementedError

    def prepare(self, n: int) -> None:
        """Build what ``submit`` sends (outside the clock)."""
        self._n = n

    def submit(self) -> None:
        """Enqueue the prepared tasks one by one (inside the clock)."""
        raise NotImplementedError

    def tracker(self) -> Tracker:
        raise NotImplementedError

    def finish(self) -> None:
        """After the clock stopped (e.g. wait for a leader to exit)."""

    def stop(self) -> None:
        stop(self.procs)
        self.procs = []

    def warm_up(self) -> None:
        self._await_ready()
        self.run_batch(self.opts.warm_tasks, what="warm-up")
        time.sleep(0.3)  # let every worker go back to idle

    # --- helpers ---------------------------------------------------------------------------

    def run_batch(self, n: int, *, what: str) -> None:
        self.prepare(n)
        self.submit()
        self.tracker().wait(timeout=self.opts.timeout, what=f"{self.name} {what}", alive=self.alive)
        self.finish()

    def send_ready(self) -> None:
        raise NotImplementedError

    def _await_ready(self) -> None:
        """Send short 'ready' tasks until every worker process has run one."""
        r = client(self.db)
        r.delete(READY_KEY)
        deadline = time.monotonic() + 90.0
        while r.scard(READY_KEY) < self.workers:
            self.alive()
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{self.name}: only {r.scard(READY_KEY)} of {self.workers} workers ready"
                )
            for _ in range(2 * self.workers):
                self.send_ready()
            batch_end = time.monotonic() + 3.0
            while r.scard(READY_KEY) < self.workers and time.monotonic() < batch_end:
                time.sleep(0.05)
        r.close()


def _exists_check(db: int, key_of: Callable[[str], str]) -> Callable[[Sequence[str]], list[bool]]:
    r = client(db, name=TRACKER_NAME)

    def check(ids: Sequence[str]) -> list[bool]:
        pipe = r.pipeline(transaction=False)
        for i in ids:
            pipe.exists(key_of(i))
        return [bool(n) for n in pipe.execute()]

    return check


# --- Celery ------------------------------------------------------------------------------


class CelerySystem(System):
    name = "celery"
    completion = "result key in the Redis result backend"

    @property
    def pool(self) -> str:
        return "solo" if self.opts.slots == 1 else "threads"

    @property
    def how(self) -> str:  # type: ignore[override]
        return (
            f"N x `celery worker --pool {self.pool} -c {self.opts.slots} "
            "--prefetch-multiplier 1 -O fair --without-gossip --without-mingle "
            "--without-heartbeat`; acks_late"
        )

    def start(self) -> None:
        for i in range(self.workers):
            argv = [
                PYTHON, "-m", "celery", "-A", "celery_app", "worker",
                "--pool", self.pool, "--concurrency", str(self.opts.slots),
                "--prefetch-multiplier", "1",
                "-O", "fair", "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel", "WARNING", "-n", f"bench{i}@%h",
            ]  # fmt: skip
            self.procs.append(spawn(argv, env={"BENCH_URL": self.url}, log=self.log(f"{i}")))
        import celery_app

        self.app = celery_app.make_app(self.url)
        self._ids: list[str] = []

    def send_ready(self) -> None:
        self.app.tasks["bench.ready"].apply_async()

    def submit(self) -> None:
        if self.opts.sleep:
            send, args = self.app.tasks["bench.sleep"].apply_async, (self.opts.sleep,)
        else:
            send, args = self.app.tasks["bench.noop"].apply_async, ()
        self._ids = [send(args).id for _ in range(self._n)]

    def stop(self) -> None:
        super().stop()
        with contextlib.suppress(Exception):
            self.app.close()

    def tracker(self) -> Tracker:
        return Tracker(self._ids, _exists_check(self.db, lambda i: f"celery-task-meta-{i}"))


# --- RQ ------------------------------------------------------------------------------------


class RQSystem(System):
    name = "rq"
    completion = "job hash status = finished"

    worker_class: ClassVar[str] = "rq.worker.Worker"
    how = "N x `rq worker --worker-class rq.worker.Worker` (RQ's default: forks a horse per job)"

    def start(self) -> None:
        import redis
        from rq import Queue

        for i in range(self.workers):
            argv = [
                PYTHON, "-m", "rq.cli", "worker", "--url", self.url, "--worker-class",
                self.worker_class, "--logging_level", "WARNING", "--disable-job-desc-logging",
                "-n", f"bench-{i}-{os.getpid()}", "bench",
            ]  # fmt: skip
            self.procs.append(spawn(argv, env={"BENCH_URL": self.url}, log=self.log(f"{i}")))
        import rq_jobs

        self.jobs = rq_jobs
        self.conn = redis.Redis.from_url(self.url)
        self.queue = Queue("bench", connection=self.conn)
        self._ids: list[str] = []

    def send_ready(self) -> None:
        self.queue.enqueue(self.jobs.ready)

    def submit(self) -> None:
        enqueue, noop = self.queue.enqueue, self.jobs.noop
        self._ids = [enqueue(noop).id for _ in range(self._n)]

    def tracker(self) -> Tracker:
        from rq.job import Job

        r = client(self.db, name=TRACKER_NAME)

        def check(ids: Sequence[str]) -> list[bool]:
            pipe = r.pipeline(transaction=False)
            for i in ids:
                pipe.hget(Job.key_for(i), "status")
            return [s == "finished" for s in pipe.execute()]

        return Tracker(self._ids, check)


class RQSimpleSystem(RQSystem):
    name = "rq-simple"
    worker_class = "rq.worker.SimpleWorker"
    how = "N x `rq worker --worker-class rq.worker.SimpleWorker` (no fork: runs jobs in-process)"


# --- Dramatiq -------------------------------------------------------------------------------


class DramatiqSystem(System):
    name = "dramatiq"
    completion = "message key in the Redis results backend (Results middleware)"
    default_threads: ClassVar[int | None] = None  # None: the run's slots (1 for no-op tasks)

    @property
    def threads(self) -> int:
        return self.default_threads or self.opts.slots

    @property
    def how(self) -> str:  # type: ignore[override]
        return (
            f"1 x `dramatiq --processes N --threads {self.threads}` "
            f"(dramatiq_worker_timeout={self.opts.dramatiq_worker_timeout_ms} ms)"
        )

    def start(self) -> None:
        argv = [
            PYTHON, "-m", "dramatiq", "dramatiq_app", "--processes", str(self.workers),
            "--threads", str(self.threads), "--path", ".",
        ]  # fmt: skip
        env = {
            "BENCH_URL": self.url,
            "dramatiq_worker_timeout": str(self.opts.dramatiq_worker_timeout_ms),
        }
        self.procs.append(spawn(argv, env=env, log=self.log("all")))
        import dramatiq_app

        self.app = dramatiq_app
        self.broker, self.backend = dramatiq_app.make_broker(self.url)
        self._ids: list[str] = []

    def send_ready(self) -> None:
        self.broker.enqueue(self.app.ready.message())

    def submit(self) -> None:
        enqueue, key = self.broker.enqueue, self.backend.build_message_key
        if self.opts.sleep:
            message, args = self.app.sleep.message, (self.opts.sleep,)
        else:
            message, args = self.app.noop.message, ()
        self._ids = [key(enqueue(message(*args))) for _ in range(self._n)]

    def stop(self) -> None:
        super().stop()
        with contextlib.suppress(Exception):
            self.broker.close()

    def tracker(self) -> Tracker:
        return Tracker(self._ids, _exists_check(self.db, lambda k: k))


class DramatiqDefaultSystem(DramatiqSystem):
    name = "dramatiq-default"
    default_threads = 8  # what `dramatiq` runs without --threads


# --- raw Streams ceiling ----------------------------------------------------------------------


class RawSystem(System):
    name = "raw-streams"
    how = "N x raw_worker.py: XREADGROUP COUNT 1 BLOCK 500 -> json.loads -> XACK"
    completion = "consumer group: all entries read and none pending (XINFO GROUPS)"

    def start(self) -> None:
        import raw_worker

        self.raw = raw_worker
        self.r = client(self.db)
        raw_worker.ensure_group(self.r)
        for i in range(self.workers):
            argv = [PYTHON, "raw_worker.py", self.url, f"c{i}"]
            self.procs.append(spawn(argv, log=self.log(f"{i}")))

    def send_ready(self) -> None:
        self.r.xadd(self.raw.STREAM, {"p": '{"kind": "ready"}'})

    def prepare(self, n: int) -> None:
        super().prepare(n)
        self._base = self._group()["entries-read"] or 0

    def submit(self) -> None:
        xadd, stream = self.r.xadd, self.raw.STREAM
        for i in range(self._n):
            xadd(stream, {"p": f'{{"kind": "noop", "n": {i}}}'})

    def _group(self) -> dict[str, Any]:
        if not hasattr(self, "tracker_client"):
            self.tracker_client = client(self.db, name=TRACKER_NAME)
        for group in self.tracker_client.xinfo_groups(self.raw.STREAM):
            if group["name"] == self.raw.GROUP:
                return dict(group)
        raise BenchError("raw-streams: the consumer group is missing")

    def tracker(self) -> Tracker:
        system = self

        class GroupTracker(Tracker):
            def poll(self) -> int:
                group = system._group()
                read = int(group["entries-read"] or 0) - system._base
                done = max(0, read - int(group["pending"]))
                if done >= self.total and int(group["lag"] or 0) == 0:
                    self.pending = []
                    return self.total
                return min(done, self.total - 1)

        return GroupTracker([str(i) for i in range(self._n)], lambda ids: [False] * len(ids))


# --- Tenure ------------------------------------------------------------------------------------


class _TenureBase(System):
    team: ClassVar[str] = "bench"
    completion = "task state in the register (done, or any settled state, counted apart)"

    def start(self) -> None:
        from tenure.store import open_store

        self.store = open_store(self.url)
        self.state_dir = self.opts.run_dir / f"{self.name}-w{self.workers}-state"
        self._batch = 0
        self.settled_not_done: list[tuple[str, str]] = []
        self.lead = self._keys()
        slot_flags, self.slots = concurrency_flags(self.opts.slots)
        executor = f"sleep:{self.opts.sleep:g}" if self.opts.sleep else "noop"
        for i in range(self.workers):
            argv = [
                *self.launcher(i), "worker", "--store", self.url, "--team", self.team,
                "--exec", executor, "--member", f"w{i}", "--state-dir", str(self.state_dir),
                *self.worker_flags(), *slot_flags, *self._key_flags(),
            ]  # fmt: skip
            self.procs.append(spawn(argv, log=self.log(f"{i}")))

    def worker_flags(self) -> list[str]:
        return []

    def _keys(self) -> Any:
        """The lead's credentials, with a key for every worker, as `tenure run` makes
        them (None when the run is unsigned)."""
        if not self.opts.signed:
            return None
        from tenure.coord.credentials import Credentials, init_team

        self.keys_dir = self.opts.run_dir / f"{self.name}-w{self.workers}-keys"
        init_team(self.keys_dir, self.team, [f"w{i}" for i in range(self.workers)])
        return Credentials.load(self.keys_dir, self.team, "bench-leader", "lead")

    def _key_flags(self) -> list[str]:
        return ["--keys", str(self.keys_dir)] if self.opts.signed else ["--insecure"]

    def launcher(self, index: int) -> list[str]:
        """How worker ``index`` runs the ``tenure`` CLI (the profiler wraps it)."""
        return [PYTHON, "-m", "tenure"]

    def stop(self) -> None:
        super().stop()
        self.store.close()

    def _make_plan(self, n: int) -> Any:
        from tenure.protocol import Plan, PlanTask

        self._batch += 1
        prefix = f"b{self._batch}-"
        tasks = [PlanTask(id=f"{prefix}{i:05d}", goal="no-op") for i in range(n)]
        return Plan(team=self.team, tasks=tasks)

    def prepare(self, n: int) -> None:
        super().prepare(n)
        self.plan = self._make_plan(n)

    def tracker(self) -> Tracker:
        r = client(self.db, name=TRACKER_NAME)
        keys = self.store.keys  # type: ignore[attr-defined]
        settled = self.settled_not_done

        def check(ids: Sequence[str]) -> list[bool]:
            pipe = r.pipeline(transaction=False)
            for i in ids:
                pipe.hget(keys.team(self.team, f"task:{i}"), "state")
            states = pipe.execute()
            for i, s in zip(ids, states, strict=True):
                if s in ("blocked", "failed", "cancelled"):
                    settled.append((i, s))
            return [s in ("done", "blocked", "failed", "cancelled") for s in states]

        return Tracker([t.id for t in self.plan.tasks], check)


class TenureQueueSystem(_TenureBase):
    name = "tenure-queue"
    team = "benchq"
    how = "N x `python -m tenure worker --queue --exec noop`; enqueue_plan() in-process"

    def worker_flags(self) -> list[str]:
        return ["--queue"]

    def submit(self) -> None:
        from tenure.roles.teams.queue import enqueue_plan

        enqueue_plan(self.store, self.plan, credentials=self.lead)

    def _await_ready(self) -> None:
        """Warm-up batches until every worker has executed a task (its id as assignee)."""
        seen: set[str] = set()
        deadline = time.monotonic() + 90.0
        while len(seen) < self.workers:
            if time.monotonic() > deadline:
                raise BenchError(f"{self.name}: only {sorted(seen)} took work")
            self.run_batch(4 * self.workers, what="readiness")
            for task in self.plan.tasks:
                assignee = self.store.get_task(self.team, task.id).assignee
                if assignee:
                    seen.add(assignee)


class TenureTeamSystem(_TenureBase):
    name = "tenure-team"
    team = "bencht"
    how = "N x `python -m tenure worker --exec noop` + tenure.roles.Leader(plan) in-process"

    def start(self) -> None:
        super().start()
        self._leader: threading.Thread | None = None
        self._stop = threading.Event()
        self._outcome: list[str] = []

    def warm_up(self) -> None:
        """Every worker joined; no warm-up batch. A team's register keeps the first plan
        it ran (a later, different plan is superseded by it), so the timed plan must be
        the team's first one."""
        self._await_ready()
        time.sleep(0.3)

    def _await_ready(self) -> None:
        def joined() -> bool:
            members = self.store.members(self.team)
            return sum(1 for m in members if "work" in m.capabilities) >= self.workers

        wait_until(joined, timeout=60.0, what=f"{self.name}: workers joining", alive=self.alive)

    def submit(self) -> None:
        from tenure.coord import LeaseTiming
        from tenure.roles import Leader, LeaderConfig

        config = LeaderConfig(
            team=self.team,
            member_id="bench-leader",
            priority=100,
            timing=LeaseTiming(ttl=3.0),
            state_dir=self.state_dir,
            stale_grace=3.0,
            credentials=self.lead,
        )
        leader = Leader(self.store, config, self.plan)
        self._stop = threading.Event()
        self._outcome = []
        self._leader = threading.Thread(
            target=lambda: self._outcome.append(leader.lead(self._stop)),
            name="bench-leader",
            daemon=True,
        )
        self._leader.start()

    def finish(self) -> None:
        if self._leader is not None:
            self._leader.join(timeout=30.0)
            if self._leader.is_alive():
                self._stop.set()
                self._leader.join(timeout=10.0)
                raise BenchError(f"{self.name}: the leader did not exit after the plan finished")
            self._leader = None

    def stop(self) -> None:
        self._stop.set()
        if self._leader is not None:
            self._leader.join(timeout=10.0)
        super().stop()


SYSTEMS: dict[str, type[System]] = {
    cls.name: cls
    for cls in (
        CelerySystem,
        RQSystem,
        RQSimpleSystem,
        DramatiqSystem,
        DramatiqDefaultSystem,
        RawSystem,
        TenureQueueSystem,
        TenureTeamSystem,
    )
}
PEERS = ("celery", "rq", "rq-simple", "dramatiq", "dramatiq-default")
RAW = "raw-streams"
TENURE = ("tenure-queue", "tenure-team")
