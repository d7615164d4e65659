"""An attempt in three store calls: a worker takes it (``receive``), begins it
(``begin_attempt``) and ends it — record, report or judge, ack — in one ``commit``;
and a step whose staged writes turn out stale is made again, one call each.

On Redis each of those calls is one script, so one round trip."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import LEASE_TOKEN
from tenure.executors import NoopExecutor
from tenure.protocol import Plan, PlanTask
from tenure.protocol.errors import Conflict
from tenure.protocol.taskspec import TaskSpec
from tenure.roles.member import WORK_QUEUE, Follower, FollowerConfig, Mailbox, envelope_for
from tenure.roles.member.wire import LEADER_QUEUE, member_queue
from tenure.roles.register import Register
from tenure.roles.teams.queue import QueueWorker, enqueue_plan
from tenure.store import Store
from tenure.store.staged import StagedStore, Unstageable
from tenure.store.writes import Ack

CALLS = (
    "receive",
    "begin_attempt",
    "commit",
    "transition",
    "get_task",
    "tasks",
    "effect_lookup",
    "effect_begin",
    "effect_finish",
    "append_event",
    "send",
    "send_many",
    "ack",
    "now",
)


def counted(store: Store) -> Counter[str]:
    """Count the calls this thread makes on ``store`` (a heartbeat's are not ours), the
    outermost only: what one SQLite transaction makes of other calls is one call."""
    me = threading.get_ident()
    seen: Counter[str] = Counter()
    depth = [0]
    for name in CALLS:
        method = getattr(store, name)

        def wrapper(
            *args: Any, _name: str = name, _method: Callable[..., Any] = method, **kw: Any
        ) -> Any:
            if threading.get_ident() != me:
                return _method(*args, **kw)
            if depth[0] == 0:
                seen[_name] += 1
            depth[0] += 1
            try:
                return _method(*args, **kw)
            finally:
                depth[0] -= 1

        setattr(store, name, wrapper)
    return seen


def test_a_queue_attempt_is_three_store_calls(store: Store) -> None:
    plan = Plan(team="rt", tasks=[PlanTask(id=f"t{i}", goal="g") for i in range(3)])
    enqueue_plan(store, plan)
    worker = QueueWorker(store, "rt", "w1", NoopExecutor(), member_ttl=30.0)
    seen = counted(store)
    for _ in range(3):
        assert worker.poll_once()
    ours = {name: count for name, count in seen.items() if count}
    assert ours == {"receive": 3, "begin_attempt": 3, "commit": 3}
    assert {t.task_id: t.state for t in store.tasks("rt")} == {f"t{i}": "done" for i in range(3)}
    assert store.receive("rt", WORK_QUEUE, consumer="w2", visibility_timeout=1.0) == []


def test_a_step_staged_on_a_task_that_changed_is_refused_whole(store: Store) -> None:
    plan = Plan(team="rt", tasks=[PlanTask(id="t1", goal="g")])
    enqueue_plan(store, plan)
    [delivery] = store.receive("rt", WORK_QUEUE, consumer="w1", visibility_timeout=30.0)
    task = store.get_task("rt", "t1")
    staged = StagedStore(store, tasks=[task])
    moved = staged.transition("rt", "t1", epoch=1, expect=["queued"], to="running")
    assert (moved.state, moved.version) == ("running", task.version + 1)
    assert store.get_task("rt", "t1").state == "queued"  # nothing written yet
    staged.append_event("rt", "x.seen", {"n": 1})
    store.transition("rt", "t1", epoch=1, expect=["queued"], to="queued")  # meanwhile
    before = store.last_event_seq("rt")
    with pytest.raises(Conflict):
        staged.commit_staged("rt", Ack(WORK_QUEUE, delivery.message_id))
    assert store.get_task("rt", "t1").state == "queued"
    assert store.last_event_seq("rt") == before
    assert store.ack("rt", WORK_QUEUE, delivery.message_id)  # the ack was not made either


def test_what_cannot_be_staged_says_so(store: Store) -> None:
    staged = StagedStore(store)
    with pytest.raises(Unstageable):
        staged.create_tasks("rt", [("t1", {"goal": "g"})], epoch=1)
    staged.append_event("a", "x", {})
    with pytest.raises(Unstageable):
        staged.append_event("b", "x", {})


def test_a_queue_worker_whose_staged_judgement_is_refused_judges_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task changes between the attempt's begin and its commit (here: the commit is
    refused as if it had): the worker records, judges and acks one call each."""
    plan = Plan(team="rt", tasks=[PlanTask(id="t1", goal="g")])
    enqueue_plan(store, plan)
    worker = QueueWorker(store, "rt", "w1", NoopExecutor(), member_ttl=30.0)

    def refused(self: StagedStore, team: str, *more: Any) -> list[Any]:
        raise Conflict("task 't1' is at version 9, expected 3")

    monkeypatch.setattr(StagedStore, "commit_staged", refused)
    assert worker.poll_once()
    task = store.get_task("rt", "t1")
    assert (task.state, task.attempt) == ("done", 1)
    assert store.effect_lookup("rt", "t1:attempt-1") is not None
    assert store.receive("rt", WORK_QUEUE, consumer="w2", visibility_timeout=1.0) == []


def test_a_follower_attempt_is_three_store_calls(store: Store, tmp_path: Path) -> None:
    epoch = store.claim_lease("rt", "leader", 30.0, token=LEASE_TOKEN).epoch
    register = Register(store, "rt", lambda: epoch)
    mailbox = Mailbox(store, "rt", "leader")
    for task_id in ("t1", "t2"):
        task = register.create(task_id, TaskSpec(id=task_id, goal="g"))
        task = register.move(task, "queued", assignee="w1", attempt=1)
        mailbox.assign(envelope_for(task, epoch=epoch, assignee="w1"))
    config = FollowerConfig(team="rt", member_id="w1", state_dir=tmp_path, member_ttl=30.0)
    follower = Follower(store, config, NoopExecutor())
    seen = counted(store)
    assert follower.poll_once() and follower.poll_once()
    ours = {name: count for name, count in seen.items() if count}
    assert ours == {"receive": 2, "begin_attempt": 2, "commit": 2}
    results = store.receive(
        "rt", LEADER_QUEUE, consumer="leader", visibility_timeout=30.0, max_messages=5
    )
    assert sorted(d.payload["body"]["task_id"] for d in results) == ["t1", "t2"]
    assert {t.task_id: t.state for t in store.tasks("rt")} == {"t1": "running", "t2": "running"}
    assert store.receive("rt", member_queue("w1"), consumer="w1", visibility_timeout=1.0) == []


def test_a_step_that_decided_on_a_task_it_did_not_move_is_refused_once_it_changed(
    store: Store,
) -> None:
    """A staged judgement that only logged (the task looked not to be waiting for it)
    is not committed once the task it read has moved on: its guard refuses it."""
    plan = Plan(team="rt", tasks=[PlanTask(id="t1", goal="g")])
    enqueue_plan(store, plan)
    seen = store.get_task("rt", "t1")
    staged = StagedStore(store, tasks=[seen])
    assert staged.get_task("rt", "t1").state == "queued"
    staged.append_event("rt", "x.absorbed", {"task_id": "t1"})
    store.transition("rt", "t1", epoch=1, expect=["queued"], to="running")  # meanwhile
    before = store.last_event_seq("rt")
    with pytest.raises(Conflict):
        staged.commit_staged("rt")
    assert store.last_event_seq("rt") == before
