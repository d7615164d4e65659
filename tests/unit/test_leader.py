"""The leader's behaviour, driven round by round on a real store.

A ``Crew`` holds one conductor (its epoch callable is a real ``LeaseKeeper``)
and followers driven with ``poll_once``, so each test decides exactly when the
leader ticks and when each worker works: deterministic and fast. The local
team, ``Leader.run`` and queue mode are run end to end as well.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors import CommandExecutor, PythonExecutor, TaskContext, coerce_result
from tenure.protocol import (
    LeaseLost,
    Plan,
    PriorAttempt,
    ProtocolError,
    StaleEpoch,
    TaskEnvelope,
    TaskResult,
    parse_message,
)
from tenure.roles import LEADER_QUEUE, Conductor, Follower, FollowerConfig, Leader, LeaderConfig
from tenure.roles.teams.local import LocalTeam
from tenure.roles.teams.queue import QueueWorker, enqueue_plan
from tenure.store import DEFAULT_MAX_DELIVERIES, Event, Store, TaskRecord

TEAM = "unit-leader"


class Recording:
    """An executor recording every call; ``produce(env, ctx)`` makes the result."""

    def __init__(self, produce: Callable[[TaskEnvelope, TaskContext], Any] | None = None) -> None:
        self.calls: list[TaskEnvelope] = []
        self.produce = produce or (lambda env, ctx: {"done": env.task_id})
        self.lock = threading.Lock()

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        with self.lock:
            self.calls.append(envelope)
        return coerce_result(envelope, self.produce(envelope, ctx))

    def count(self) -> Counter[str]:
        return Counter(env.task_id for env in self.calls)

    def keys(self) -> list[str]:
        return [env.idempotency_key for env in self.calls]


def scripted(steps: dict[str, list[Any]]) -> Callable[[TaskEnvelope, TaskContext], Any]:
    """One step per attempt of each task (the last one repeats)."""

    def produce(env: TaskEnvelope, ctx: TaskContext) -> Any:
        options = steps.get(env.task_id, [{"done": env.task_id}])
        return options[min(env.attempt, len(options)) - 1]

    return produce


FAIL = {"status": "failed", "notes": {"uncertain": ["the vendor site timed out"]}}


def plan_of(*tasks: dict[str, Any], **fields: Any) -> Plan:
    return Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [{"goal": f"do {t['id']}", **t} for t in tasks],
            **fields,
        }
    )


class Crew:
    """A conductor under a real lease plus followers the test drives by hand."""

    def __init__(
        self,
        store: Store,
        tmp_path: Path,
        plan: Plan | None,
        *,
        leader: str = "leader-1",
        ttl: float = 30.0,
        stale_grace: float = 0.05,
    ) -> None:
        self.store = store
        self.tmp_path = tmp_path
        self.keeper = LeaseKeeper(store, TEAM, leader, LeaseTiming(ttl=ttl))
        self.keeper.claim()
        self.conductor = Conductor(
            store, TEAM, leader, self.keeper.check, workdir=tmp_path, stale_grace=stale_grace
        )
        self.conductor.load(plan)
        self.followers: dict[str, Follower] = {}

    def hire(
        self,
        member: str,
        executor: Any,
        *,
        capabilities: tuple[str, ...] = (),
        priority: int = 0,
        member_ttl: float = 30.0,
    ) -> Follower:
        config = FollowerConfig(
            team=TEAM,
            member_id=member,
            priority=priority,
            capabilities=capabilities,
            member_ttl=member_ttl,
            state_dir=self.tmp_path / "state",
            checkin_interval=60.0,
        )
        follower = Follower(self.store, config, executor)
        follower.heartbeat.join()
        self.followers[member] = follower
        return follower

    def work(self, *members: str) -> None:
        for member in members or tuple(self.followers):
            while self.followers[member].poll_once():
                pass

    def run(self, rounds: int = 40) -> None:
        for _ in range(rounds):
            self.conductor.tick()
            if self.conductor.finished():
                return
            self.work()
        raise AssertionError(f"not finished after {rounds} rounds: {states(self.store)}")


def task(store: Store, task_id: str) -> TaskRecord:
    return store.get_task(TEAM, task_id)


def states(store: Store) -> dict[str, str]:
    return {t.task_id: t.state for t in store.tasks(TEAM)}


def events(store: Store, kind: str) -> list[Event]:
    return [e for e in store.events(TEAM, limit=10_000) if e.kind == kind]


def history(record: TaskRecord) -> list[PriorAttempt]:
    return [PriorAttempt.model_validate(h) for h in record.data.get("history", [])]


# --- dispatch ---------------------------------------------------------------------------


def test_a_dependent_task_waits_for_its_dependency_and_gets_its_artifact(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "fetch"}, {"id": "price", "depends_on": ["fetch"]})
    executor = Recording(scripted({"fetch": [{"rows": 3, "source": "vendor"}]}))
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", executor)
    crew.hire("w2", executor)
    crew.conductor.tick()
    assert task(store, "fetch").assignee is not None
    assert task(store, "price").assignee is None, "dispatched before its dependency was done"
    assert task(store, "price").attempt == 0
    crew.work()
    assert executor.count() == Counter({"fetch": 1})
    crew.run()
    assert states(store) == {"fetch": "done", "price": "done"}
    price_env = next(env for env in executor.calls if env.task_id == "price")
    assert price_env.input["from_dependencies"] == {"fetch": {"rows": 3, "source": "vendor"}}


def test_capability_routes_a_task_only_to_a_worker_that_has_it(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "render", "capability": "gpu"}, {"id": "plain"})
    plain, gpu = Recording(), Recording()
    crew = Crew(store, tmp_path, plan)
    crew.hire("w-plain", plain, priority=10)
    for _ in range(3):
        crew.conductor.tick()
        crew.work()
    assert task(store, "render").state == "queued"
    assert task(store, "render").assignee is None
    assert plain.count() == Counter({"plain": 1})
    crew.hire("w-gpu", gpu, capabilities=("gpu",))
    crew.run()
    assert states(store) == {"render": "done", "plain": "done"}
    assert gpu.count() == Counter({"render": 1})
    assert "render" not in plain.count()


def test_an_idle_worker_is_preferred_and_each_worker_has_one_task_at_a_time(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "t1"}, {"id": "t2"}, {"id": "t3"})
    executor = Recording()
    crew = Crew(store, tmp_path, plan)
    crew.hire("w-senior", executor, priority=5)
    crew.hire("w-junior", executor, priority=1)
    crew.conductor.tick()
    assigned = {t.task_id: t.assignee for t in store.tasks(TEAM)}
    assert assigned == {"t1": "w-senior", "t2": "w-junior", "t3": None}
    crew.work("w-junior")  # the senior worker is still busy with t1
    crew.conductor.tick()
    assert task(store, "t2").state == "done"
    assert task(store, "t3").assignee == "w-junior", "a busy worker was given a second task"
    crew.run()
    assert executor.count() == Counter({"t1": 1, "t2": 1, "t3": 1})


# --- supervision ------------------------------------------------------------------------


def test_a_task_past_its_deadline_is_requeued_as_a_new_attempt(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "slow", "deadline_seconds": 0.2})
    executor = Recording()
    crew = Crew(store, tmp_path, plan, stale_grace=0.1)
    crew.hire("w1", executor)
    crew.conductor.tick()
    assert task(store, "slow").attempt == 1
    crew.conductor.tick()
    assert task(store, "slow").attempt == 1, "requeued before its deadline"
    time.sleep(0.35)  # the worker sat on it past deadline + grace
    crew.conductor.tick()
    record = task(store, "slow")
    assert record.attempt == 2
    assert [(h.attempt, h.status) for h in history(record)] == [(1, "failed")]
    assert "deadline of 0.2s exceeded" in history(record)[0].failure
    crew.run()
    assert executor.keys() == ["slow:attempt-2"], "the abandoned attempt ran after all"
    assert task(store, "slow").state == "done"


def test_a_silent_worker_has_its_task_redispatched_with_a_new_key_and_history(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "t"})
    silent, live = Recording(), Recording()
    crew = Crew(store, tmp_path, plan)
    crew.hire("w-silent", silent, priority=10, member_ttl=0.3)
    crew.hire("w-live", live)
    crew.conductor.tick()
    assert task(store, "t").assignee == "w-silent"
    time.sleep(0.4)  # no heartbeat: its membership expires
    crew.conductor.tick()
    record = task(store, "t")
    assert (record.assignee, record.attempt) == ("w-live", 2)
    crew.work("w-live")
    (env,) = live.calls
    assert env.idempotency_key == "t:attempt-2"
    assert [(h.attempt, h.status) for h in env.history] == [(1, "failed")]
    assert "w-silent stopped heartbeating" in env.history[0].failure
    crew.run()
    assert task(store, "t").state == "done"
    assert silent.calls == []


# --- judging results --------------------------------------------------------------------


def test_a_failed_result_is_retried_as_a_new_attempt_carrying_history(
    store: Store, tmp_path: Path
) -> None:
    executor = Recording(scripted({"t": [FAIL, {"total": 3}]}))
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", executor)
    crew.run()
    assert executor.keys() == ["t:attempt-1", "t:attempt-2"]
    assert executor.calls[0].history == []
    (prior,) = executor.calls[1].history
    assert (prior.attempt, prior.status) == (1, "failed")
    assert "the vendor site timed out" in prior.failure
    assert task(store, "t").state == "done"
    assert events(store, "task.retry")[0].data["task_id"] == "t"


def test_a_rejected_result_is_retried_with_the_check_failure_in_history(
    store: Store, tmp_path: Path
) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    plan = plan_of({"id": "t", "output_schema": schema})
    executor = Recording(scripted({"t": [{"total": "lots"}, {"total": 3}]}))
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", executor)
    crew.run()
    (prior,) = executor.calls[1].history
    assert prior.status == "rejected"
    assert "schema check failed" in prior.failure
    assert "artifact total" in prior.failure
    record = task(store, "t")
    assert record.state == "done"
    assert record.result is not None and record.result["artifact"] == {"total": 3}
    verdicts = [(e.data["check"], e.data["passed"]) for e in events(store, "verify.verdict")]
    assert verdicts == [("schema", False), ("schema", True)]


def test_a_task_without_checks_is_accepted_as_a_self_report_and_says_so(
    store: Store, tmp_path: Path
) -> None:
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", Recording())
    crew.run()
    assert task(store, "t").reason == "accepted: self-report"
    (verdict,) = events(store, "verify.verdict")
    assert verdict.data["check"] == "self-report"


def test_a_failing_command_check_rejects_a_claimed_success(store: Store, tmp_path: Path) -> None:
    checks = [{"kind": "command", "run": "test -f built.txt"}]
    executor = Recording(scripted({"t": [{"claim": "built it"}]}))
    crew = Crew(store, tmp_path, plan_of({"id": "t", "checks": checks, "max_attempts": 2}))
    crew.hire("w1", executor)
    crew.run()
    record = task(store, "t")
    assert record.state == "blocked"
    assert len(executor.calls) == 2
    assert all(h.status == "rejected" for h in history(record))
    assert "command check failed" in history(record)[0].failure


def test_after_max_attempts_the_task_is_blocked_with_the_reason_and_an_inbox_event(
    store: Store, tmp_path: Path
) -> None:
    executor = Recording(lambda env, ctx: FAIL)
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", executor)
    crew.run()
    record = task(store, "t")
    assert record.state == "blocked"
    assert executor.keys() == ["t:attempt-1", "t:attempt-2", "t:attempt-3"]
    assert record.reason.startswith("gave up after 3 attempts")
    assert "the vendor site timed out" in record.reason
    assert [h.attempt for h in history(record)] == [1, 2, 3]
    (added,) = events(store, "inbox.added")
    assert added.data["task_id"] == "t"
    assert "gave up after 3 attempts" in added.data["reason"]


def test_the_plan_max_attempts_is_honoured(store: Store, tmp_path: Path) -> None:
    executor = Recording(lambda env, ctx: FAIL)
    crew = Crew(store, tmp_path, plan_of({"id": "t"}, max_attempts=2))
    crew.hire("w1", executor)
    crew.run()
    assert len(executor.calls) == 2
    assert task(store, "t").state == "blocked"


def test_a_blocked_result_goes_to_the_inbox_without_retry(store: Store, tmp_path: Path) -> None:
    ask = {"status": "blocked", "question": "list price or net price?"}
    executor = Recording(lambda env, ctx: ask)
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", executor)
    crew.run()
    record = task(store, "t")
    assert record.state == "blocked"
    assert record.data["question"] == "list price or net price?"
    assert record.reason == "question: list price or net price?"
    assert len(executor.calls) == 1
    assert [e.data["task_id"] for e in events(store, "inbox.added")] == ["t"]
    assert events(store, "task.retry") == []


def test_a_refusal_is_honoured_not_retried(store: Store, tmp_path: Path) -> None:
    refusal = {"status": "refused", "notes": {"uncertain": ["deleting prod data is out of scope"]}}
    executor = Recording(lambda env, ctx: refusal)
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", executor)
    crew.run()
    record = task(store, "t")
    assert record.state == "blocked"
    assert record.reason == "refused: deleting prod data is out of scope"
    assert len(executor.calls) == 1
    assert len(events(store, "inbox.added")) == 1


def test_garbage_from_a_worker_is_a_failed_attempt_with_the_error_as_failure_output(
    store: Store, tmp_path: Path
) -> None:
    import sys

    script = (
        "import json, os, sys; sys.stdin.read();"
        "print('Sure! Here is your JSON:' if os.environ['TENURE_ATTEMPT'] == '1'"
        " else json.dumps({'total': 3}))"
    )
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", CommandExecutor([sys.executable, "-c", script]))
    crew.run()
    record = task(store, "t")
    assert record.state == "done"
    assert record.attempt == 2
    (prior,) = history(record)
    assert prior.status == "failed"
    assert "stdout is not JSON" in prior.failure
    assert "Sure! Here is your JSON:" in prior.failure


def test_a_result_failing_the_result_schema_is_a_failed_attempt(
    store: Store, tmp_path: Path
) -> None:
    bad = {"status": "completed", "artifact": 1, "confidence": 7}  # confidence is 0..1
    executor = Recording(scripted({"t": [bad, {"ok": True}]}))
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", executor)
    crew.run()
    record = task(store, "t")
    assert record.state == "done"
    (prior,) = history(record)
    assert prior.status == "failed"
    assert "invalid result" in prior.failure
    assert "confidence" in prior.failure


def test_garbage_on_the_leader_queue_is_logged_and_the_leader_carries_on(
    store: Store, tmp_path: Path
) -> None:
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", Recording())
    store.send(TEAM, LEADER_QUEUE, {"lol": "not a message"})
    store.send(
        TEAM,
        LEADER_QUEUE,
        {
            "type": "task.result",
            "team": TEAM,
            "from": "w9",
            "to": LEADER_QUEUE,
            "epoch": 1,
            "body": {
                "task_id": "ghost",
                "idempotency_key": "ghost:attempt-1",
                "epoch": 1,
                "status": "completed",
            },
        },
    )
    crew.run()
    assert task(store, "t").state == "done"
    for _ in range(DEFAULT_MAX_DELIVERIES):  # the garbage comes back until dead-lettered
        crew.conductor.drain()
    bad = events(store, "leader.bad_message")
    assert len({e.data["id"] for e in bad}) == 2
    assert any("ghost" in e.data["error"] for e in bad)
    assert [d.payload for d in store.dead_letters(TEAM)] == [{"lol": "not a message"}]
    assert not store.receive(TEAM, LEADER_QUEUE, consumer="peek", visibility_timeout=1.0)


def test_a_register_entry_no_envelope_can_carry_is_blocked_not_a_crash(
    store: Store, tmp_path: Path
) -> None:
    """A spec written by an older version (or by hand) with a check this one cannot read."""
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    store.create_task(
        TEAM, "odd", epoch=crew.keeper.epoch, spec={"goal": "g", "checks": [{"kind": "vibes"}]}
    )
    crew.hire("w1", Recording())
    crew.run()
    assert task(store, "t").state == "done"
    odd = task(store, "odd")
    assert odd.state == "blocked"
    assert "cannot build its envelope" in odd.reason and "kind" in odd.reason


def test_a_queued_task_behind_a_blocked_dependency_does_not_keep_the_leader_busy(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of(
        {"id": "a", "max_attempts": 1},
        {"id": "b", "depends_on": ["a"]},
        {"id": "c", "depends_on": ["b"]},
    )
    executor = Recording(scripted({"a": [FAIL]}))
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", executor)
    crew.run()  # raises if the conductor never considers itself finished
    assert states(store) == {"a": "blocked", "b": "queued", "c": "queued"}
    assert executor.count() == Counter({"a": 1})


# --- leadership -------------------------------------------------------------------------


def test_a_leader_past_its_own_deadline_raises_lease_lost_before_writing(
    store: Store, tmp_path: Path
) -> None:
    keeper = LeaseKeeper(store, TEAM, "leader-1", LeaseTiming(ttl=3.0, margin_fraction=0.9))
    keeper.claim()  # the leader must stop 0.3 s in, long before the store's 3 s expiry
    conductor = Conductor(store, TEAM, "leader-1", keeper.check, stale_grace=0.05)
    conductor.load(plan_of({"id": "t"}))
    crew_worker = Follower(
        store, FollowerConfig(team=TEAM, member_id="w1", checkin_interval=60.0), Recording()
    )
    crew_worker.heartbeat.join()
    store.send(TEAM, LEADER_QUEUE, {"lol": "a message the next leader must still see"})
    before = len(store.events(TEAM, limit=10_000))
    time.sleep(0.35)
    assert store.current_lease(TEAM) is not None, "the store still thinks it leads"
    with pytest.raises(LeaseLost):
        keeper.check()
    with pytest.raises(LeaseLost):
        conductor.tick()
    record = task(store, "t")
    assert (record.state, record.attempt, record.assignee) == ("queued", 0, None)
    written = [e.kind for e in store.events(TEAM, after=0, limit=10_000)[before:]]
    assert "task.transition" not in written
    assert "task.dispatched" not in written
    assert store.receive(TEAM, LEADER_QUEUE, consumer="next", visibility_timeout=1.0), (
        "a deposed leader hid the leader queue from its successor"
    )


def test_a_new_leader_rebuilds_from_the_register_with_no_task_lost_or_done_twice(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"})
    executor = Recording()
    first = Crew(store, tmp_path, plan, leader="leader-1", ttl=2.0)  # room for a loaded machine
    for member in ("w1", "w2", "w3"):
        first.hire(member, executor)
    first.conductor.tick()  # a -> w1, b -> w2, c -> w3; d waits for a free worker
    first.work("w1")
    first.conductor.tick()  # a done; d -> w1
    first.work("w2")  # b ran; its result waits in the leader queue
    assert states(store) == {"a": "done", "b": "running", "c": "queued", "d": "queued"}
    assert executor.count() == Counter({"a": 1, "b": 1})
    # leader-1 vanishes without releasing; its lease runs out
    deadline = time.monotonic() + 6
    while store.current_lease(TEAM) is not None:
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.02)

    keeper = LeaseKeeper(store, TEAM, "leader-2", LeaseTiming(ttl=30.0))
    assert keeper.claim().epoch == 2
    second = Conductor(store, TEAM, "leader-2", keeper.check, stale_grace=0.05)
    second.load(None)  # no plan object: everything comes from the register
    second.adopt()
    for _ in range(20):
        second.tick()
        if second.finished():
            break
        first.work()
    assert states(store) == {"a": "done", "b": "done", "c": "done", "d": "done"}
    assert executor.count() == Counter({"a": 1, "b": 1, "c": 1, "d": 1})
    assert all(t.attempt == 1 for t in store.tasks(TEAM))
    adopted = {e.data["task_id"] for e in events(store, "leader.adopted")}
    assert adopted == {"b", "c", "d"}
    assert len(events(store, "follower.fenced")) == 2  # c and d's epoch-1 envelopes
    with pytest.raises(LeaseLost):
        first.conductor.tick()  # the old leader, should it wake up, does nothing


def test_a_leader_fenced_by_the_store_leaves_results_for_its_successor(
    store: Store, tmp_path: Path
) -> None:
    executor = Recording()
    old = Crew(store, tmp_path, plan_of({"id": "t"}), leader="leader-1")
    old.hire("w1", executor)
    old.conductor.tick()
    old.work()  # the result is in the leader queue
    sent = [e for e in events(store, "message.sent") if e.data.get("queue") == LEADER_QUEUE]
    assert len(sent) == 1
    # the store moves on to a new epoch while leader-1 still believes its lease is good
    successor = LeaseKeeper(store, TEAM, "leader-2", LeaseTiming(ttl=30.0))
    held = store.current_lease(TEAM)
    assert held is not None
    assert successor.seize(held).epoch == 2
    with pytest.raises(StaleEpoch):
        old.conductor.tick()
    assert task(store, "t").state == "running"
    assert store.ack(TEAM, LEADER_QUEUE, sent[0].data["id"]), (
        "the fenced leader acked (and so discarded) a result it could not record"
    )


def test_the_lease_is_released_when_the_plan_is_done(store: Store, tmp_path: Path) -> None:
    stop = threading.Event()
    followers = [
        Follower(
            store,
            FollowerConfig(team=TEAM, member_id=f"w{n}", poll_interval=0.01, checkin_interval=60),
            Recording(),
        )
        for n in (1, 2)
    ]
    threads = [threading.Thread(target=f.run, args=(stop,), daemon=True) for f in followers]
    for thread in threads:
        thread.start()
    config = LeaderConfig(
        team=TEAM, member_id="leader-1", elect=False, poll_interval=0.01, stale_grace=0.5
    )
    try:
        result = Leader(store, config, plan_of({"id": "a"}, {"id": "b"})).run(threading.Event())
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
    assert result.ok and (result.outcome, result.done) == ("done", 2)
    assert states(store) == {"a": "done", "b": "done"}
    assert store.current_lease(TEAM) is None
    assert store.current_epoch(TEAM) == 1
    [settled] = events(store, "leader.plan_settled")
    assert settled.data["counts"] == {"done": 2}


def test_a_leader_whose_tasks_wait_for_a_person_says_so_not_done(store: Store) -> None:
    """``Leader.run()`` returns what the register says, as ``Team.run()`` does: a plan
    settled with a task in the inbox is ``blocked``, with counts and each task's outcome."""
    ask = {"status": "blocked", "question": "which region?"}
    worker = Follower(
        store,
        FollowerConfig(team=TEAM, member_id="w1", poll_interval=0.01),
        Recording(scripted({"ask": [ask]})),
    )
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    config = LeaderConfig(team=TEAM, member_id="leader-1", elect=False, poll_interval=0.01)
    plan = plan_of({"id": "ok"}, {"id": "ask"}, {"id": "after", "depends_on": ["ask"]})
    try:
        leader = Leader(store, config, plan)
        result = leader.run(timeout=30)
    finally:
        stop.set()
        thread.join(timeout=5)
    assert leader.settled and not result.ok
    assert result.outcome == "blocked"
    assert (result.done, result.blocked, result.failed, result.open) == (1, 1, 0, 1)
    assert result.tasks["ask"].question == "which region?"
    assert result.tasks["ok"].state == "done" and result.tasks["after"].state == "queued"
    [settled] = events(store, "leader.plan_settled")
    assert settled.data["counts"] == {"blocked": 1, "done": 1, "queued": 1}
    assert events(store, "leader.plan_finished") == []


def test_local_mode_runs_a_plan_end_to_end(store: Store, tmp_path: Path) -> None:
    plan = plan_of(
        {"id": "fetch"},
        {"id": "clean", "depends_on": ["fetch"]},
        {"id": "price", "depends_on": ["clean"]},
        {"id": "other"},
        {"id": "flaky"},
    )
    executor = Recording(scripted({"flaky": [FAIL, {"ok": True}]}))
    team = LocalTeam(store, plan, executor, workers=2, state_dir=tmp_path / "state")
    assert team.run() == "settled"
    assert set(states(store).values()) == {"done"}
    assert executor.count() == Counter({"fetch": 1, "clean": 1, "price": 1, "other": 1, "flaky": 2})
    assert store.current_lease(TEAM) is None
    assert store.members(TEAM) == []


def test_local_mode_finishes_with_blocked_tasks_in_the_inbox(store: Store, tmp_path: Path) -> None:
    plan = plan_of({"id": "ok"}, {"id": "ask"}, {"id": "after", "depends_on": ["ask"]})
    ask = {"status": "blocked", "question": "which region?"}
    team = LocalTeam(store, plan, Recording(scripted({"ask": [ask]})), workers=2)
    outcome: list[str] = []
    runner = threading.Thread(target=lambda: outcome.append(team.run()), daemon=True)
    runner.start()
    runner.join(timeout=15)
    assert outcome == ["settled"], "the local team never finished"
    assert states(store)["ok"] == "done"
    assert states(store)["ask"] == "blocked"


# --- queue mode -------------------------------------------------------------------------


def queue_workers(store: Store, executor: Any, n: int = 2, **kw: Any) -> list[QueueWorker]:
    return [QueueWorker(store, TEAM, f"q{i}", executor, **kw) for i in range(1, n + 1)]


def settle(workers: list[QueueWorker], store: Store, rounds: int = 50) -> None:
    for _ in range(rounds):
        busy = [w.poll_once() for w in workers]
        if not any(busy) and all(
            t.state not in ("queued", "running", "review") for t in store.tasks(TEAM)
        ):
            return
    raise AssertionError(f"queue not settled: {states(store)}")


def test_queue_mode_runs_a_plan_end_to_end(store: Store) -> None:
    executor = Recording()
    assert enqueue_plan(store, plan_of({"id": "a"}, {"id": "b"}, {"id": "c"})) == 3
    workers = queue_workers(store, executor)
    settle(workers, store)
    assert states(store) == {"a": "done", "b": "done", "c": "done"}
    assert executor.count() == Counter({"a": 1, "b": 1, "c": 1})
    assert sum(w.executed for w in workers) == 3
    assert store.current_lease(TEAM) is None, "queue mode has no leader"


def test_queue_mode_refuses_a_plan_with_dependencies(store: Store) -> None:
    with pytest.raises(ProtocolError) as info:
        enqueue_plan(store, plan_of({"id": "a"}, {"id": "b", "depends_on": ["a"]}))
    assert info.value.field == "tasks[1].depends_on"
    assert store.tasks(TEAM) == []


def test_queue_mode_retries_a_failure_with_history_then_gives_up(store: Store) -> None:
    executor = Recording(scripted({"flaky": [FAIL, {"ok": True}], "broken": [FAIL]}))
    enqueue_plan(store, plan_of({"id": "flaky"}, {"id": "broken"}, max_attempts=2))
    settle(queue_workers(store, executor), store)
    assert states(store) == {"flaky": "done", "broken": "blocked"}
    retried = [env for env in executor.calls if env.task_id == "flaky" and env.attempt == 2]
    (prior,) = retried[0].history
    assert prior.status == "failed" and "the vendor site timed out" in prior.failure
    assert executor.count() == Counter({"flaky": 2, "broken": 2})
    assert [e.data["task_id"] for e in events(store, "inbox.added")] == ["broken"]


def test_queue_mode_verifies_results(store: Store) -> None:
    schema = {"type": "object", "required": ["total"]}
    executor = Recording(scripted({"t": [{"nope": 1}, {"total": 1}]}))
    enqueue_plan(store, plan_of({"id": "t", "output_schema": schema}))
    settle(queue_workers(store, executor), store)
    assert task(store, "t").state == "done"
    assert [env.history[0].status for env in executor.calls[1:]] == ["rejected"]


def test_queue_mode_honours_the_task_executor_spec(store: Store) -> None:
    default = Recording()
    enqueue_plan(store, plan_of({"id": "t", "executor": "noop"}))
    settle(queue_workers(store, default, n=1, allowed_executors=("noop",)), store)
    assert task(store, "t").state == "done"
    assert default.calls == [], "the queue worker ignored the task's executor"


def test_queue_message_taken_again_after_visibility_expiry_does_not_run_twice(
    store: Store,
) -> None:
    enqueue_plan(store, plan_of({"id": "t"}))
    started, release = threading.Event(), threading.Event()
    workers_seen: list[str] = []

    def slow(env: TaskEnvelope, ctx: TaskContext) -> dict[str, str]:
        workers_seen.append(ctx.worker_id)
        started.set()
        release.wait(5)
        return {"by": ctx.worker_id}

    first, second = queue_workers(store, PythonExecutor(slow), visibility_timeout=0.2)
    runner = threading.Thread(target=first.poll_once, daemon=True)
    runner.start()
    assert started.wait(5)
    time.sleep(0.3)  # q1 is still working, but its message became visible again
    assert second.poll_once() is True, "the expired message was not redelivered"
    assert second.executed == 0
    release.set()
    runner.join(timeout=5)
    time.sleep(0.3)
    second.poll_once()
    assert workers_seen == ["q1"]
    assert (first.executed, second.executed) == (1, 0)
    record = task(store, "t")
    assert (record.state, record.attempt) == ("done", 1)
    assert record.result is not None and record.result["artifact"] == {"by": "q1"}


def test_results_reach_the_leader_as_protocol_messages(store: Store, tmp_path: Path) -> None:
    """What a follower puts in the leader queue parses as a task.result (the wire contract)."""
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", Recording())
    crew.conductor.tick()
    crew.work()
    (delivery,) = store.receive(TEAM, LEADER_QUEUE, consumer="peek", visibility_timeout=0.05)
    message = parse_message(delivery.payload)
    assert message.type == "task.result"
    assert message.body.idempotency_key == "t:attempt-1"


def test_queue_mode_picks_up_an_answered_task_when_the_plan_is_enqueued_again(
    store: Store,
) -> None:
    def agent(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        if not env.input.get("operator_answers"):
            return {"status": "blocked", "question": "which region?"}
        return {"region": env.input["operator_answers"][0]["answer"]}

    plan = plan_of({"id": "t"}, {"id": "u"})
    enqueue_plan(store, plan)
    settle(queue_workers(store, Recording(agent)), store)
    assert states(store) == {"t": "blocked", "u": "blocked"}
    record = task(store, "t")  # the operator answers t, as `tenure answer` does
    store.transition(
        TEAM,
        "t",
        epoch=store.current_epoch(TEAM),
        expect=["blocked"],
        to="queued",
        version=record.version,
        assignee=None,
        data={
            **record.data,
            "qa": [{"question": "which region?", "answer": "EU"}],
            "attempt_base": record.attempt,
        },
    )
    assert enqueue_plan(store, plan) == 1
    settle(queue_workers(store, Recording(agent)), store)
    assert states(store) == {"t": "done", "u": "blocked"}
    result = task(store, "t").result
    assert result is not None and result["artifact"] == {"region": "EU"}
