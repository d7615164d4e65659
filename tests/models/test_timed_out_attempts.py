"""An attempt that times out in a team: its LLM worker stops calling at the deadline, what
its calls cost is charged to the task (from its result, or from its ``model.call`` events
when it never reports in time), and the retry goes to the idle worker, not the one that
just ran out of time. A real conductor and real followers on threads, LLM workers on the
real SDK against the local wire server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors import Executor, TaskContext
from tenure.executors.llm import LLMExecutor
from tenure.models import open_model
from tenure.protocol import Plan, TaskEnvelope, TaskResult
from tenure.roles import Conductor, Follower, FollowerConfig
from tenure.roles.features import standard_hooks
from tenure.roles.register import read_task
from tenure.roles.register.spend import stuck_workers, task_totals
from tenure.store import Store, open_store

from .conftest import ServerFactory
from .wire_server import Reply, answer, slow

TEAM = "slow"
MORE = {"status": "continue", "progress": "one more page"}
DONE = {"status": "completed", "artifact": {"pages": 3}}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    yield opened
    opened.close()


class Team:
    """One conductor ticking on this thread, followers polling on their own threads."""

    def __init__(
        self,
        store: Store,
        tmp_path: Path,
        plan: Plan,
        workers: dict[str, Executor],
        *,
        stale_grace: float,
    ) -> None:
        self.store = store
        keeper = LeaseKeeper(store, TEAM, "leader", LeaseTiming(ttl=60.0))
        keeper.claim()
        self.conductor = Conductor(
            store,
            TEAM,
            "leader",
            keeper.check,
            workdir=tmp_path,
            hooks=standard_hooks(),
            stale_grace=stale_grace,
        )
        self.conductor.load(plan)
        self.stop = threading.Event()
        self.threads = []
        for rank, (member, executor) in enumerate(workers.items()):
            config = FollowerConfig(
                team=TEAM,
                member_id=member,
                priority=len(workers) - rank,  # the first one named is picked first
                member_ttl=30.0,
                state_dir=tmp_path / "state",
                workdir=tmp_path,
                checkin_interval=60.0,
            )
            follower = Follower(store, config, executor)
            follower.heartbeat.join()
            thread = threading.Thread(target=follower.run, args=(self.stop,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def run(self, timeout: float = 30.0, *, during: Callable[[], None] | None = None) -> None:
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.conductor.tick()
                if during is not None:
                    during()
                if self.conductor.finished():
                    return
                time.sleep(0.02)
            raise AssertionError(f"not finished: {[t.state for t in self.store.tasks(TEAM)]}")
        finally:
            self.stop.set()
            for thread in self.threads:
                thread.join(10)


def plan(deadline: float) -> Plan:
    return Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [
                {
                    "id": "read",
                    "goal": "Read every page.",
                    "deadline_seconds": deadline,
                    "max_attempts": 2,
                }
            ],
        }
    )


def retried(body: dict[str, Any]) -> bool:
    return any("Earlier attempts that failed" in str(m.get("content")) for m in body["messages"])


def dispatched_to(store: Store) -> list[str]:
    return [e.data["assignee"] for e in store.events(TEAM, limit=10_000) if e.kind == "task.dispatched"]


class Timed:
    """An executor that notes when each attempt started, by worker."""

    def __init__(self, inner: Executor, member: str, started: dict[str, float]) -> None:
        self.inner, self.member, self.started = inner, member, started

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        self.started.setdefault(self.member, time.monotonic())
        return self.inner.execute(envelope, ctx)


def test_a_timed_out_attempt_stops_calling_is_charged_and_is_retried_on_the_idle_worker(
    wire: ServerFactory, store: Store, tmp_path: Path
) -> None:
    first: list[float] = []

    def respond(provider: str, body: dict[str, Any]) -> Reply:
        if retried(body):
            return answer(DONE)
        first.append(time.monotonic())
        return answer(MORE) if len(first) == 1 else slow(20.0, MORE)  # then it hangs

    server = wire(responder=respond)
    model = open_model(f"openai:test-model@{server.openai_url}", max_retries=2, timeout=30)
    started: dict[str, float] = {}
    workers: dict[str, Executor] = {
        name: Timed(LLMExecutor(model, max_turns=10), name, started) for name in ("w1", "w2")
    }
    Team(store, tmp_path, plan(1.5), workers, stale_grace=2.0).run()

    record = read_task(store.get_task(TEAM, "read"))
    assert record.state == "done"
    assert dispatched_to(store) == ["w1", "w2"]  # the retry went to the idle worker
    # the first attempt stopped at its deadline and made no request after it
    assert first and all(at < started["w1"] + 1.5 for at in first)
    assert len(first) == 2
    one, two = sorted((e for e in record.data.spend_log if not e.kind), key=lambda e: e.attempt)
    assert (one.member, two.member) == ("w1", "w2")
    assert one.calls == 1 and one.tokens > 0  # the call that ended is charged
    assert one.seconds >= 1.4  # and the wall time it ran
    assert "stopped: the attempt's deadline passed" in record.data.history[0].failure
    totals = task_totals(record)
    assert totals.calls == 2 and totals.tokens == one.tokens + two.tokens


class Stuck:
    """A worker that does its model calls, then hangs before it reports (until released)."""

    def __init__(self, inner: Executor, release: threading.Event) -> None:
        self.inner, self.release = inner, release

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        result = self.inner.execute(envelope, ctx)
        self.release.wait(30)
        return result


def test_a_silent_attempt_is_charged_from_its_calls_and_its_late_result(
    wire: ServerFactory, store: Store, tmp_path: Path
) -> None:
    def respond(provider: str, body: dict[str, Any]) -> Reply:
        return slow(1.0, DONE) if retried(body) else answer(DONE)  # w2 takes a while

    server = wire(responder=respond)
    model = open_model(f"openai:test-model@{server.openai_url}", max_retries=0, timeout=30)
    release = threading.Event()
    workers: dict[str, Executor] = {
        "w1": Stuck(LLMExecutor(model), release),
        "w2": LLMExecutor(model),
    }
    seen: dict[str, Any] = {}

    def watch() -> None:
        """Once the leader has given up on w1, note what it charged, then let w1 report."""
        if release.is_set():
            return
        entries = read_task(store.get_task(TEAM, "read")).data.spend_log
        given_up = [e for e in entries if e.abandoned]
        if given_up:
            tasks = [read_task(t) for t in store.tasks(TEAM)]
            seen.update(entry=given_up[0], stuck=stuck_workers(tasks))
            release.set()

    Team(store, tmp_path, plan(2.0), workers, stale_grace=0.3).run(during=watch)

    calls = [e.data for e in store.events(TEAM, limit=10_000) if e.kind == "model.call"]
    by_w1 = [c for c in calls if c["member"] == "w1"]
    assert len(by_w1) == 1
    # when the leader gave up, it charged what w1's own model.call events said
    entry = seen["entry"]
    assert (entry.member, entry.awaiting) == ("w1", True)
    assert entry.calls == 1 and entry.input_tokens == by_w1[0]["input_tokens"] > 0
    assert entry.seconds >= 2.0
    assert seen["stuck"] == {"w1"}
    assert dispatched_to(store) == ["w1", "w2"]  # not back to the stuck worker
    record = read_task(store.get_task(TEAM, "read"))
    assert record.state == "done"
    one = next(e for e in record.data.spend_log if e.attempt == 1 and not e.kind)
    assert one.abandoned and not one.awaiting  # its late result came and was charged
    assert one.tokens == by_w1[0]["input_tokens"] + by_w1[0]["output_tokens"]
    late = [e.data for e in store.events(TEAM, limit=10_000) if e.kind == "leader.late_result"]
    assert [(e["member"], e["charged"]) for e in late] == [("w1", True)]
    assert task_totals(record).calls == 2
