"""Leader hooks: a hook of the caller's own is called at every point of a task's life,
the conductor knows no feature by name, and task options are a whitelist."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.executors import NoopExecutor, ScriptedExecutor
from tenure.protocol import ConfigError, Plan, TaskResult
from tenure.protocol.taskspec import AttemptData
from tenure.roles import Follower, FollowerConfig, LocalTeam
from tenure.roles.leader import (
    GO,
    HOLD,
    Admission,
    Candidate,
    Conductor,
    Dispatch,
    LeaderConfig,
    LeaderContext,
    LeaderHook,
    Review,
    Stop,
    Watch,
)
from tenure.roles.register import Task
from tenure.store import Store, open_store
from tenure.verify import Verdict

TEAM = "hooked"
POINTS = {
    "on_takeover",
    "before_dispatch",
    "on_dispatch",
    "on_watch",
    "on_tick",
    "on_result",
    "before_review",
    "on_accept",
    "before_retry",
    "on_exhausted",
    "on_settled",
}


class Recorder(LeaderHook):
    """Says nothing, remembers every call: (point, task id or None)."""

    name: ClassVar[str] = "recorder"
    options: ClassVar[frozenset[str]] = frozenset({"colour"})

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def _saw(self, point: str, task: Task | None = None) -> None:
        self.calls.append((point, task.task_id if task else None))

    def on_takeover(self, ctx: LeaderContext, task: Task) -> bool:
        self._saw("on_takeover", task)
        return False

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        self._saw("before_dispatch", task)
        return GO

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        self._saw("on_dispatch", dispatch.task)

    def on_watch(self, ctx: LeaderContext, task: Task, now: float) -> Watch | None:
        self._saw("on_watch", task)
        return None

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        self._saw("on_tick")
        return False

    def on_result(self, ctx: LeaderContext, task: Task, result: TaskResult) -> str | None:
        self._saw("on_result", task)
        return None

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> Review | None:
        self._saw("before_review", task)
        return None

    def on_accept(self, ctx: LeaderContext, task: Task, verdicts: list[Verdict]) -> bool:
        self._saw("on_accept", task)
        return False

    def before_retry(self, ctx: LeaderContext, task: Task, data: AttemptData) -> str | None:
        self._saw("before_retry", task)
        return None

    def on_exhausted(self, ctx: LeaderContext, task: Task, failure: str, data: AttemptData) -> bool:
        self._saw("on_exhausted", task)
        return False

    def on_settled(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        self._saw("on_settled")
        return False


def plan() -> Plan:
    return Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [
                {"id": "ok", "goal": "succeed", "options": {"colour": "blue"}},
                {"id": "flaky", "goal": "fail once, then succeed"},
                {"id": "hopeless", "goal": "always fail", "max_attempts": 1},
            ],
        }
    )


EXECUTOR = ScriptedExecutor(
    {
        "ok": [{"done": True}],
        "flaky": [{"status": "failed", "notes": {"uncertain": ["flake"]}}, {"done": True}],
        "hopeless": [{"status": "failed", "notes": {"uncertain": ["no"]}}],
    }
)


def conductor(store: Store, me: str, hook: LeaderHook) -> tuple[Conductor, LeaseKeeper]:
    keeper = LeaseKeeper(store, TEAM, me, LeaseTiming(ttl=60))
    keeper.claim()
    return Conductor(store, TEAM, me, keeper.check, hooks=[hook]), keeper


def test_a_hook_sees_every_point_of_a_tasks_life(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    worker = Follower(
        store, FollowerConfig(team=TEAM, member_id="w1", member_ttl=60, checkin_interval=60), EXECUTOR
    )
    worker.heartbeat.join()
    first = Recorder()
    old, keeper = conductor(store, "old", first)
    old.load(plan())
    old.tick()  # dispatches "ok" to the only worker, which has not taken it yet
    keeper.release()
    hook = Recorder()
    new, _ = conductor(store, "new", hook)
    new.adopt()  # a new leader finds "ok" assigned
    for _ in range(30):
        new.tick()
        if new.finished():
            break
        while worker.poll_once():
            pass
    states = {t.task_id: t.state for t in store.tasks(TEAM)}
    assert states == {"ok": "done", "flaky": "done", "hopeless": "blocked"}
    seen = {point for point, _ in hook.calls}
    assert seen == POINTS, f"never called: {POINTS - seen}"
    assert ("on_takeover", "ok") in hook.calls
    assert ("on_exhausted", "hopeless") in hook.calls and ("on_accept", "flaky") in hook.calls
    assert ("before_retry", "flaky") in hook.calls
    store.close()


def test_an_option_no_hook_reads_is_refused_when_the_plan_loads(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    config = LeaderConfig(team=TEAM, member_id="l", elect=False)
    with pytest.raises(ConfigError, match=r"tasks\[0\]\.options\.colour: no leader feature"):
        Candidate(store, config, plan())
    Candidate(store, config, plan(), hooks=[Recorder()])  # a hook that declares it: accepted
    store.close()


class Veto(LeaderHook):
    """Holds back every task whose options say so: a feature the conductor never names."""

    options: ClassVar[frozenset[str]] = frozenset({"hold"})

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Any:
        return "hold" if task.spec.options.get("hold") else GO


def test_a_hook_can_hold_a_task_back_from_dispatch(tmp_path: Path) -> None:
    store = open_store("memory://")
    tasks = [{"id": "go", "goal": "run"}, {"id": "wait", "goal": "held", "options": {"hold": True}}]
    held = Plan.model_validate({"team": TEAM, "tasks": tasks})
    team = LocalTeam(store, held, NoopExecutor(), workers=1, hooks=[Veto()])
    stop = threading.Event()
    runner = threading.Thread(target=team.run, args=(stop,), daemon=True)
    runner.start()
    try:
        for _ in range(500):
            if {t.task_id: t.state for t in store.tasks(TEAM)}.get("go") == "done":
                break
            stop.wait(0.02)
        assert store.get_task(TEAM, "go").state == "done"
        assert store.get_task(TEAM, "wait").attempt == 0  # never dispatched
    finally:
        stop.set()
        runner.join(timeout=10)


# --- a hook's context, and a stop said by a hook ---------------------------------------

CONTEXT = {
    "store",
    "team",
    "me",
    "register",
    "trust",
    "workdir",
    "credentials",
    "epoch",
    "now",
    "event",
    "tasks",
    "workers",
    "dispatch",
    "send",
    "review",
    "retry",
    "block",
    "fail",
    "finish",
}


class Peeker(LeaderHook):
    """Looks at what its context lets it reach, once a round."""

    name: ClassVar[str] = "peeker"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        self.seen.append(ctx)
        return False


def test_a_hook_reaches_the_leader_only_through_what_the_protocol_lists(tmp_path: Path) -> None:
    store = open_store("memory://")
    peeker = Peeker()
    lead, _ = conductor(store, "lead", peeker)
    lead.load(plan_of({"id": "a", "goal": "a"}))
    lead.tick()
    ctx = peeker.seen[-1]
    assert not isinstance(ctx, Conductor)
    public = {name for name in dir(ctx) if not name.startswith("_")}
    assert public == CONTEXT  # the LeaderContext protocol, nothing more
    assert {n for n in dir(LeaderContext) if not n.startswith("_")} == CONTEXT
    for private in ("_send", "_epoch", "_round", "reviewer", "hooks", "view", "mailbox", "load"):
        assert not hasattr(ctx, private), private
    assert not hasattr(ctx, "__dict__")  # nothing can be hung on it either
    with pytest.raises(AttributeError):
        ctx.hooks = lead.hooks
    assert ctx.team == TEAM and ctx.me == "lead" and ctx.epoch() == lead.epoch()
    assert [t.task_id for t in ctx.tasks()] == ["a"]
    store.close()


def plan_of(*tasks: dict[str, Any]) -> Plan:
    return Plan.model_validate({"team": TEAM, "tasks": list(tasks)})


class Halt(LeaderHook):
    """Stops one task before it is sent, another instead of its retry, and a third
    through its context; none of it has anything to do with a budget."""

    name: ClassVar[str] = "halter"

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        if task.task_id == "early":
            return Stop("halted by my hook", by="someone else")
        if task.task_id == "direct":
            ctx.fail(task, "failed through the context")
            return HOLD
        return GO

    def before_retry(self, ctx: LeaderContext, task: Task, data: AttemptData) -> str | None:
        return "no second try here" if task.task_id == "late" else None


def stopped(store: Store) -> dict[str, dict[str, Any]]:
    return {e.data["task_id"]: e.data for e in store.events(TEAM, limit=5000) if e.kind == "task.stopped"}


def test_a_stop_from_a_hook_is_logged_as_that_hooks_not_as_a_budget() -> None:
    store = open_store("memory://")
    executor = ScriptedExecutor({"late": [{"status": "failed", "notes": {"uncertain": ["flake"]}}]})
    three = plan_of(
        {"id": "early", "goal": "never sent"},
        {"id": "late", "goal": "fails once", "max_attempts": 3},
        {"id": "direct", "goal": "failed by the hook itself"},
    )
    LocalTeam(store, three, executor, workers=1, hooks=[Halt()]).run(timeout=20)
    records = {t.task_id: t for t in store.tasks(TEAM)}
    assert {k: r.state for k, r in records.items()} == dict.fromkeys(records, "failed")
    assert records["early"].reason == "halted by my hook" and records["early"].attempt == 0
    assert records["late"].reason.startswith("no second try here; last failure: flake")
    assert records["late"].attempt == 1
    said = stopped(store)
    assert {k: (d["by"], d["reason"]) for k, d in said.items()} == {
        "early": ("halter", "halted by my hook"),
        "late": ("halter", records["late"].reason),
        "direct": ("halter", "failed through the context"),
    }
    kinds = [e.kind for e in store.events(TEAM, limit=5000)]
    assert "budget.exceeded" not in kinds and kinds.count("inbox.added") == 3
    store.close()


def test_a_worker_that_stops_for_its_budget_is_stopped_by_the_budget_feature() -> None:
    """The conductor does not recognise a budget: the budget hook reads the worker's
    failed result, stops the task (no retry) and logs ``budget.exceeded`` itself."""
    store = open_store("memory://")
    over = "budget exceeded: tokens: 2100 of 2000"
    executor = ScriptedExecutor({"a": [{"status": "failed", "notes": {"uncertain": [over, "more"]}}]})
    LocalTeam(store, plan_of({"id": "a", "goal": "spend", "max_attempts": 5}), executor).run(timeout=20)
    record = store.get_task(TEAM, "a")
    assert (record.state, record.attempt, record.reason) == ("failed", 1, over)
    assert stopped(store)["a"]["by"] == "budgets"
    [budget] = [e for e in store.events(TEAM, limit=5000) if e.kind == "budget.exceeded"]
    assert budget.data == {"leader": "leader", "task_id": "a", "reason": over}
    store.close()
