"""Real runtime objects for the trust tests: a conductor under a real lease, real followers
on a real SQLite store, driven round by round so every test is deterministic and fast."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors import TaskContext, coerce_result
from tenure.models import ChatMessage, ScriptedModel
from tenure.protocol import Plan, TaskEnvelope, TaskResult
from tenure.roles import Conductor, Follower, FollowerConfig
from tenure.roles.features import standard_hooks
from tenure.store import Event, Store, TaskRecord
from tenure.verify import Trust

TEAM = "trust"
Produce = Callable[[TaskEnvelope, TaskContext], Any]


class Recording:
    """An executor that records each envelope and who ran it; ``produce`` makes the result."""

    def __init__(self, produce: Produce) -> None:
        self.produce = produce
        self.calls: list[tuple[str, TaskEnvelope]] = []
        self.lock = threading.Lock()

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        with self.lock:
            self.calls.append((ctx.worker_id, envelope))
        return coerce_result(envelope, self.produce(envelope, ctx))

    def workers_for(self, prefix: str) -> list[str]:
        return [w for w, env in self.calls if env.task_id.startswith(prefix)]


class Crew:
    """One conductor (its epoch is a real ``LeaseKeeper``) and followers driven by hand."""

    def __init__(
        self, store: Store, tmp_path: Path, plan: Plan, *, trust: Trust | None = None
    ) -> None:
        self.store = store
        self.tmp_path = tmp_path
        self.keeper = LeaseKeeper(store, TEAM, "leader-1", LeaseTiming(ttl=30.0))
        self.keeper.claim()
        self.conductor = Conductor(
            store,
            TEAM,
            "leader-1",
            self.keeper.check,
            workdir=tmp_path,
            trust=trust,
            hooks=standard_hooks(),
        )
        self.conductor.load(plan)
        self.followers: dict[str, Follower] = {}

    def hire(self, member: str, executor: Any, *, capabilities: tuple[str, ...] = ()) -> None:
        config = FollowerConfig(
            team=TEAM,
            member_id=member,
            capabilities=capabilities,
            member_ttl=30.0,
            state_dir=self.tmp_path / "state",
            workdir=self.tmp_path,
            checkin_interval=60.0,
        )
        follower = Follower(self.store, config, executor)
        follower.heartbeat.join()
        self.followers[member] = follower

    def run(self, rounds: int = 60) -> None:
        for _ in range(rounds):
            self.conductor.tick()
            if self.conductor.finished():
                return
            for follower in self.followers.values():
                while follower.poll_once():
                    pass
        raise AssertionError(f"not finished after {rounds} rounds: {states(self.store)}")


def plan_of(*tasks: dict[str, Any], **fields: Any) -> Plan:
    return Plan.model_validate(
        {"team": TEAM, "tasks": [{"goal": f"do {t['id']}", **t} for t in tasks], **fields}
    )


def task(store: Store, task_id: str) -> TaskRecord:
    return store.get_task(TEAM, task_id)


def states(store: Store) -> dict[str, str]:
    return {t.task_id: t.state for t in store.tasks(TEAM)}


def events(store: Store, kind: str, task_id: str | None = None) -> list[Event]:
    return [
        e
        for e in store.events(TEAM, limit=100_000)
        if e.kind == kind and (task_id is None or e.data.get("task_id") == task_id)
    ]


def ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


def judge_preferring(needle: str) -> ScriptedModel:
    """A fair judge: prefers the answer containing ``needle`` wherever it is shown."""

    def reply(messages: list[ChatMessage]) -> dict[str, str]:
        text = messages[-1].content
        a = text.split("## Answer A", 1)[1].split("## Answer B", 1)[0]
        better = "A" if needle in a else "B"
        return {"better": better, "reason": f"the answer with {needle} matches the source"}

    return ScriptedModel(reply, name="fair-judge", provider="scripted")


def sycophant() -> ScriptedModel:
    """A judge that agrees with whatever answer it is shown first."""
    return ScriptedModel(
        [{"better": "A", "reason": "the first answer looks right"}],
        name="sycophant",
        provider="scripted",
    )
