"""Slots per worker, in one process on a real store: a member with N slots runs N
attempts at once, says its free slots, is never sent more than N by its leader, runs
each key once, and cancels one attempt or all of them as the case asks."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import tenure
from tenure.console.run_cmds import team_worker_args
from tenure.console.state_cmds import team_table
from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors import PythonExecutor, TaskContext
from tenure.protocol import ConfigError, Plan, TaskEnvelope
from tenure.protocol.errors import MemberIdTaken
from tenure.roles import Conductor, Follower, FollowerConfig
from tenure.roles.member import WORK_QUEUE
from tenure.roles.teams import sub_leader
from tenure.roles.teams.queue import QueueWorker, enqueue_plan
from tenure.store import Store

TEAM = "unit-slots"


def plan_of(count: int, **task: Any) -> Plan:
    tasks = [{"id": f"t{n}", "goal": f"do t{n}", **task} for n in range(1, count + 1)]
    return Plan.model_validate({"team": TEAM, "tasks": tasks})


class Timeline:
    """What each attempt did, as its executor saw it: when it started and ended, and
    whether it was cancelled. ``hold`` makes attempts wait for ``release`` (or their
    cancellation) instead of sleeping ``seconds``."""

    def __init__(self, seconds: float = 0.0, *, hold: bool = False) -> None:
        self.seconds = seconds
        self.hold = hold
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.spans: list[tuple[float, float]] = []
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.keys: Counter[str] = Counter()

    def __call__(self, env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        start = time.monotonic()
        with self.lock:
            self.started.append(env.task_id)
            self.keys[env.idempotency_key] += 1
        if self.hold:
            deadline = time.monotonic() + 10
            while not (ctx.cancelled.is_set() or self.release.is_set()):
                if time.monotonic() > deadline:
                    break
                ctx.cancelled.wait(0.01)
        else:
            time.sleep(self.seconds)
        with self.lock:
            self.spans.append((start, time.monotonic()))
            if ctx.cancelled.is_set():
                self.cancelled.append(env.task_id)
        return {"task": env.task_id}

    def peak(self) -> int:
        """The most attempts that were running at one moment."""
        moments = sorted([(s, 1) for s, _ in self.spans] + [(e, -1) for _, e in self.spans])
        running = most = 0
        for _, step in moments:
            running += step
            most = max(most, running)
        return most

    def wait_started(self, count: int, timeout: float = 10.0) -> None:
        until(lambda: len(self.started) >= count, timeout, f"{count} attempts to start")


def attempt_claims(store: Store) -> Counter[str]:
    """How often each attempt's idempotency key was claimed (``effect.claimed``)."""
    keys = (e.data.get("key", "") for e in store.events(TEAM) if e.kind == "effect.claimed")
    return Counter(key for key in keys if ":attempt-" in key)


def until(probe: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Lead:
    """A conductor under a real lease, ticked by the test."""

    def __init__(self, store: Store, tmp_path: Path, plan: Plan, **options: Any) -> None:
        self.store = store
        self.keeper = LeaseKeeper(store, TEAM, "leader", LeaseTiming(ttl=30.0))
        self.keeper.claim()
        self.conductor = Conductor(
            store, TEAM, "leader", self.keeper.check, workdir=tmp_path, **options
        )
        self.conductor.load(plan)

    def in_flight(self) -> Counter[str]:
        """Attempts the register holds as each worker's: sent, their results not in."""
        return Counter(
            t.assignee
            for t in self.store.tasks(TEAM)
            if t.state in ("queued", "running") and t.assignee
        )


def follower(
    store: Store, tmp_path: Path, member: str, executor: Any, slots: int, **config: Any
) -> Follower:
    settings = {"member_ttl": 30.0, "checkin_interval": 60.0, "poll_interval": 0.01, **config}
    made = Follower(
        store,
        FollowerConfig(
            team=TEAM,
            member_id=member,
            state_dir=tmp_path / "state",
            concurrency=slots,
            **settings,
        ),
        PythonExecutor(executor),
    )
    return made


Background = Callable[[Callable[[threading.Event], None]], tuple[threading.Event, list[Any]]]


@pytest.fixture
def background(store: Store) -> Iterator[Background]:
    """``start(target)`` runs ``target(stop)`` on a thread; what it raised lands in the
    returned list. Every one is stopped and joined before the store closes."""
    started: list[tuple[threading.Event, threading.Thread]] = []

    def start(target: Callable[[threading.Event], None]) -> tuple[threading.Event, list[Any]]:
        stop, raised = threading.Event(), []

        def body() -> None:
            try:
                target(stop)
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                raised.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        started.append((stop, thread))
        thread.start()
        return stop, raised

    yield start
    for stop, thread in started:
        stop.set()
        thread.join(timeout=15)


# --- running at once -------------------------------------------------------------------


def test_a_team_worker_with_four_slots_runs_four_attempts_at_once(store: Store) -> None:
    timeline = Timeline(0.5)
    result = tenure.Team(plan_of(4), executor=timeline, store=store, workers=1, concurrency=4).run(
        timeout=30
    )
    assert result.ok, result
    assert timeline.peak() >= 3, timeline.spans
    assert set(timeline.keys.values()) == {1} and len(timeline.keys) == 4
    assert attempt_claims(store) == Counter({f"t{n}:attempt-1": 1 for n in range(1, 5)})


def test_a_follower_says_its_slots_and_how_many_are_free(
    store: Store, tmp_path: Path, background: Background
) -> None:
    lead = Lead(store, tmp_path, plan_of(2))
    timeline = Timeline(hold=True)
    worker = follower(store, tmp_path, "w1", timeline, slots=3, member_ttl=0.6)
    stop, raised = background(worker.run)
    until(lambda: store.members(TEAM), 5, "w1 to join")
    [joined] = store.members(TEAM)
    assert (joined.slots, joined.free_slots) == (3, 3)
    lead.conductor.tick()
    timeline.wait_started(2)
    until(lambda: store.members(TEAM)[0].free_slots == 1, 5, "a beat saying 1 free slot")
    timeline.release.set()
    until(lambda: store.members(TEAM)[0].free_slots == 3, 5, "a beat saying 3 free slots")
    stop.set()
    until(lambda: not store.members(TEAM), 5, "w1 to leave")
    assert raised == []


def test_the_leader_fills_each_worker_up_to_its_slots_and_never_more(
    store: Store, tmp_path: Path
) -> None:
    lead = Lead(store, tmp_path, plan_of(9))
    timeline = Timeline()
    wide = follower(store, tmp_path, "wide", timeline, slots=3)
    narrow = follower(store, tmp_path, "narrow", timeline, slots=1)
    for each in (wide, narrow):
        each.heartbeat.join()
    lead.conductor.tick()
    assert lead.in_flight() == Counter({"wide": 3, "narrow": 1})  # four sent in one round
    lead.conductor.tick()
    assert lead.in_flight() == Counter({"wide": 3, "narrow": 1})  # and nothing more
    for round_ in range(30):
        narrow.poll_once()  # the narrow one works; the wide one is slow to take its own
        lead.conductor.tick()
        held = lead.in_flight()
        assert held["wide"] <= 3 and held["narrow"] <= 1, held
        if lead.conductor.finished():
            break
        if round_ % 3 == 2:
            wide.poll_once()
    else:
        raise AssertionError(f"not finished: {[t.state for t in store.tasks(TEAM)]}")
    assert sum(timeline.keys.values()) == 9 and set(timeline.keys.values()) == {1}


def test_a_duplicated_envelope_in_two_slots_runs_once(store: Store, tmp_path: Path) -> None:
    """Both copies arrive in one receive and go to two slots: the second waits for the
    first (same key), then is absorbed as a replay."""
    lead = Lead(store, tmp_path, plan_of(1), duplicate=True)
    timeline = Timeline(0.2)
    worker = follower(store, tmp_path, "w1", timeline, slots=2)
    worker.heartbeat.join()
    lead.conductor.tick()
    assert worker.poll_once()
    assert timeline.keys == Counter({"t1:attempt-1": 1})
    assert attempt_claims(store) == Counter({"t1:attempt-1": 1})
    kinds = [e.kind for e in store.events(TEAM)]
    assert kinds.count("follower.duplicate_absorbed") == 1
    for _ in range(5):
        lead.conductor.tick()
    assert store.get_task(TEAM, "t1").state == "done"


# --- cancellation ----------------------------------------------------------------------


def test_cancelling_one_task_cancels_its_slot_alone(
    store: Store, tmp_path: Path, background: Background
) -> None:
    lead = Lead(store, tmp_path, plan_of(3))
    timeline = Timeline(hold=True)
    worker = follower(store, tmp_path, "w1", timeline, slots=3, member_ttl=0.6)
    stop, raised = background(worker.run)
    until(lambda: store.members(TEAM), 5, "w1 to join")
    lead.conductor.tick()
    timeline.wait_started(3)
    record = store.get_task(TEAM, "t2")
    store.transition(TEAM, "t2", epoch=lead.keeper.epoch, expect=[record.state], to="cancelled")
    until(lambda: timeline.cancelled, 5, "t2's attempt to see its cancellation")
    time.sleep(0.3)  # a beat or more later, the others still run
    assert timeline.cancelled == ["t2"]
    timeline.release.set()
    until(lambda: len(timeline.spans) == 3, 5, "every attempt to end")
    stop.set()
    assert timeline.cancelled == ["t2"] and raised == []


def test_a_lost_member_id_cancels_every_slot(
    store: Store, tmp_path: Path, background: Background
) -> None:
    lead = Lead(store, tmp_path, plan_of(3))
    timeline = Timeline(hold=True)
    worker = follower(store, tmp_path, "w1", timeline, slots=3, member_ttl=0.6)
    stop, raised = background(worker.run)
    until(lambda: store.members(TEAM), 5, "w1 to join")
    lead.conductor.tick()
    timeline.wait_started(3)
    for _ in range(20):  # its hold lapsed, and another process took the id
        store.leave(TEAM, "w1")
        try:
            store.join(TEAM, "w1", ttl=30.0, incarnation="another-process")
            break
        except MemberIdTaken:
            continue  # w1 beat in between and joined again: once more
    until(lambda: len(timeline.cancelled) == 3, 5, "all three attempts to be cancelled")
    until(lambda: raised, 5, "the follower to stop")
    assert sorted(timeline.cancelled) == ["t1", "t2", "t3"]
    assert isinstance(raised[0], MemberIdTaken)
    stop.set()


def test_a_lapsed_team_worker_has_every_slot_cancelled_once_its_leader_gives_up(
    store: Store, tmp_path: Path, background: Background
) -> None:
    """Its heartbeat lapsed: the leader retries each of its attempts elsewhere, and the
    worker's next beats (it rejoined) find none of them its own any more."""
    lead = Lead(store, tmp_path, plan_of(3))
    timeline = Timeline(hold=True)
    worker = follower(store, tmp_path, "w1", timeline, slots=3, member_ttl=1.5)
    stop, raised = background(worker.run)
    until(lambda: store.members(TEAM), 5, "w1 to join")
    lead.conductor.tick()
    timeline.wait_started(3)
    for _ in range(20):  # between two of its beats, the store has no w1
        store.leave(TEAM, "w1")
        if lead.conductor.supervise():
            break
    assert {t.state for t in store.tasks(TEAM)} == {"queued"}
    until(lambda: len(timeline.cancelled) == 3, 5, "all three attempts to be cancelled")
    assert sorted(timeline.cancelled) == ["t1", "t2", "t3"]
    stop.set()
    until(lambda: not store.members(TEAM), 5, "w1 to leave")
    assert raised == []


def test_a_lapsed_queue_worker_cancels_every_slot(store: Store, background: Background) -> None:
    enqueue_plan(store, plan_of(3))
    timeline = Timeline(hold=True)
    worker = QueueWorker(store, TEAM, "q1", PythonExecutor(timeline), member_ttl=0.6, concurrency=3)
    stop, raised = background(worker.run)
    timeline.wait_started(3)
    store.leave(TEAM, "q1")  # the store forgot it: what it held may be another's by now
    until(lambda: len(timeline.cancelled) == 3, 5, "all three attempts to be cancelled")
    assert sorted(timeline.cancelled) == ["t1", "t2", "t3"]
    stop.set()
    until(lambda: not store.members(TEAM), 5, "q1 to leave")
    assert raised == []


# --- queue mode ------------------------------------------------------------------------


def test_a_queue_worker_takes_several_messages_and_acks_each_after_its_review(
    store: Store,
) -> None:
    enqueue_plan(store, plan_of(5))
    timeline = Timeline(0.3)
    worker = QueueWorker(store, TEAM, "q1", PythonExecutor(timeline), concurrency=3)
    worker.heartbeat.join()
    assert worker.poll_once()  # three messages, at once
    assert len(timeline.spans) == 3 and timeline.peak() == 3
    assert sum(t.state == "done" for t in store.tasks(TEAM)) == 3
    assert worker.poll_once()  # the other two
    assert {t.state for t in store.tasks(TEAM)} == {"done"}
    assert timeline.keys == Counter({f"t{n}:attempt-1": 1 for n in range(1, 6)})
    left = store.receive(TEAM, WORK_QUEUE, consumer="check", visibility_timeout=1, max_messages=9)
    assert left == [] and store.dead_letters(TEAM, WORK_QUEUE) == []  # each was acked


# --- bad values ------------------------------------------------------------------------


@pytest.mark.parametrize("slots", [0, -2, 257, True])
def test_a_concurrency_out_of_range_is_refused_at_once(
    store: Store, tmp_path: Path, slots: Any
) -> None:
    with pytest.raises(ConfigError, match="concurrency: a whole number from 1 to 256"):
        tenure.Team(plan_of(1), executor="noop", store=store, concurrency=slots)
    with pytest.raises(ConfigError, match="concurrency"):
        follower(store, tmp_path, "w1", Timeline(), slots=slots)
    with pytest.raises(ConfigError, match="concurrency"):
        QueueWorker(store, TEAM, "q1", PythonExecutor(Timeline()), concurrency=slots)


def test_a_sub_leader_keeps_one_slot(store: Store) -> None:
    config = FollowerConfig(team=TEAM, member_id="s1", concurrency=2)
    with pytest.raises(ConfigError, match="a sub-leader runs one attempt at a time"):
        sub_leader(store, config, PythonExecutor(Timeline()))


def test_tenure_run_gives_its_workers_their_slots_but_not_its_sub_leaders() -> None:
    flat = plan_of(2)
    assert team_worker_args(flat, "noop", Path(".tenure"), None, concurrency=8)[-2:] == [
        "--concurrency",
        "8",
    ]
    assert "--concurrency" not in team_worker_args(flat, "noop", Path(".tenure"), None)
    leaf = {"id": "leaf", "goal": "do the leaf"}
    nested = Plan.model_validate(
        {"team": TEAM, "tasks": [{"id": "sub", "goal": "g", "team": {"tasks": [leaf]}}]}
    )
    args = team_worker_args(nested, "noop", Path(".tenure"), None, concurrency=8)
    assert "--sub-leader" in args and "--concurrency" not in args


def test_status_says_a_workers_free_slots(store: Store) -> None:
    store.join(TEAM, "wide", ttl=30.0, slots=4, free_slots=3)
    store.join(TEAM, "plain", ttl=30.0)
    console = Console(width=200, record=True, color_system=None)
    console.print(team_table(store, TEAM))
    assert "live members: plain, wide (3 of 4 slots free)" in console.export_text()
