"""Sizes and shapes inside a team, on SQLite and Redis: a result too large or too deep
to travel is a failed attempt with the reason, an envelope too large to send goes to a
person, and a goal too long for a plan is refused before a model is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from poison import POISONS, inject
from tenure.executors import PythonExecutor
from tenure.models import ScriptedModel
from tenure.protocol import ProtocolError
from tenure.protocol.limits import MAX_BODY_BYTES, MAX_FIELD_BYTES, MAX_RESULT_BYTES
from tenure.roles import QueueWorker, enqueue_plan
from tenure.roles.member import WORK_QUEUE, member_queue
from tenure.roles.member.follower import PROGRESS_LIMIT
from tenure.roles.planning import Artifact, Planner
from tenure.store import Store

from .harness import TEAM, Crew, Recording, plan_of, states, task


def deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_1_mb_result_is_a_failed_attempt_and_the_worker_goes_on(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "big", "max_attempts": 2}, {"id": "small"})
    crew = Crew(store, tmp_path, plan)

    def produce(env: Any, ctx: Any) -> Any:
        return {"blob": "x" * (1024 * 1024)} if env.task_id == "big" else {"ok": True}

    executor = Recording(produce)
    crew.hire("w1", executor)
    crew.run()
    assert states(store) == {"big": "blocked", "small": "done"}
    reason = task(store, "big").reason
    assert "the result was 1.0 MiB (1,048," in reason, reason
    assert f"the limit is 252 KiB ({MAX_RESULT_BYTES:,} bytes)" in reason
    assert [env.task_id for _, env in executor.calls].count("big") == 2  # retried, then a person


def test_a_960_deep_result_is_a_failed_attempt_not_a_recursion_error(
    store: Store, tmp_path: Path
) -> None:
    crew = Crew(store, tmp_path, plan_of({"id": "t", "max_attempts": 1}))
    crew.hire("w1", Recording(lambda env, ctx: deep(960)))
    crew.run()
    assert states(store) == {"t": "blocked"}
    assert "nested at most 64 deep" in task(store, "t").reason


def test_a_recorded_result_too_large_to_send_is_reported_as_a_failed_attempt(
    store: Store, tmp_path: Path
) -> None:
    """A result recorded before this limit (or by a worker that skipped it) is replayed
    on redelivery: it is reported as a failed attempt, the follower does not crash, and
    the next attempt runs."""
    crew = Crew(store, tmp_path, plan_of({"id": "t", "max_attempts": 2}))
    executor = Recording(lambda env, ctx: {"ok": True})
    crew.hire("w1", executor)
    crew.conductor.tick()  # attempt 1 goes out to w1, which ran it and recorded...
    epoch = crew.keeper.check()
    key = "t:attempt-1"
    record = task(store, "t")
    store.transition(
        TEAM, "t", epoch=epoch, expect=["queued"], to="running", version=record.version
    )
    store.effect_begin(TEAM, key, epoch=epoch, holder="w-old", claim_seconds=30)
    huge = {"task_id": "t", "idempotency_key": key, "epoch": epoch, "status": "completed"}
    store.effect_finish(TEAM, key, holder="w-old", result={**huge, "artifact": "x" * 2**20})
    crew.run()
    assert states(store) == {"t": "done"}
    history = task(store, "t").data["history"]
    assert "the result was 1.0 MiB" in history[0]["failure"], history
    assert [env.attempt for _, env in executor.calls] == [2]


def test_an_envelope_too_large_to_send_blocks_its_task_with_the_reason(
    store: Store, tmp_path: Path
) -> None:
    """Two dependencies' artifacts of 200 KiB each: their dependant's envelope would be
    over the body limit. It goes to a person; the leader carries on."""
    plan = plan_of({"id": "a1"}, {"id": "a2"}, {"id": "b", "depends_on": ["a1", "a2"]})
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", Recording(lambda env, ctx: {"part": "x" * (200 * 1024)}))
    crew.run()
    assert states(store) == {"a1": "done", "a2": "done", "b": "blocked"}
    reason = task(store, "b").reason
    assert "cannot build its envelope" in reason and f"the limit is {MAX_BODY_BYTES:,}" in reason


def test_a_goal_over_the_field_limit_is_refused_before_the_model_is_asked() -> None:
    model = ScriptedModel([])
    planner = Planner(model)
    with pytest.raises(ProtocolError) as caught:
        planner.plan("g" * (MAX_FIELD_BYTES + 1), [Artifact("notes.md")])
    assert str(caught.value) == f"goal: {MAX_FIELD_BYTES + 1:,} bytes; the limit is 65,536"
    assert model.calls == []


def test_a_bug_while_handling_a_message_is_one_line_and_the_follower_keeps_running(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a crash of the follower's thread: the error is logged in one line and the
    message is left unacked, to come back (and be dead-lettered if it keeps failing)."""
    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", Recording(lambda env, ctx: {"ok": True}))
    follower = crew.followers["w1"]
    real = follower.runner.run
    failures = ["boom\nand a second line"]

    def buggy(*args: Any, **kw: Any) -> Any:
        if failures:
            raise RuntimeError(failures.pop())
        return real(*args, **kw)

    monkeypatch.setattr(follower.runner, "run", buggy)
    crew.conductor.tick()
    [delivery] = store.receive(TEAM, member_queue("w1"), consumer="w1", visibility_timeout=30.0)
    follower.handle(delivery)
    [logged] = [e.data for e in store.events(TEAM) if e.kind == "follower.error"]
    assert logged["error"] == "RuntimeError: boom"
    assert store.release(TEAM, member_queue("w1"), delivery.message_id)  # still unacked
    crew.run()
    assert states(store) == {"t": "done"}


def test_a_huge_or_invalid_check_in_never_breaks_the_attempt(store: Store, tmp_path: Path) -> None:
    def produce(env: Any, ctx: Any) -> Any:
        ctx.progress("p" * (2 * 1024 * 1024))  # sent, its message cut to PROGRESS_LIMIT
        ctx.progress("half way", 2.0)  # an invalid fraction: logged, not raised
        return {"ok": True}

    crew = Crew(store, tmp_path, plan_of({"id": "t"}))
    crew.hire("w1", Recording(produce))
    crew.run()
    assert states(store) == {"t": "done"}
    [progress] = [e.data for e in store.events(TEAM) if e.kind == "task.progress"]
    assert progress["message"] == "p" * PROGRESS_LIMIT
    [bad] = [e.data for e in store.events(TEAM) if e.kind == "follower.bad_progress"]
    assert "fraction_done" in bad["error"]


@pytest.mark.parametrize("poison", ["deep", "garbage", "huge"])
def test_a_poisoned_work_queue_is_dead_lettered_and_the_queue_worker_goes_on(
    store: Store, tmp_path: Path, poison: str
) -> None:
    bad = inject(store, TEAM, WORK_QUEUE, POISONS[poison])
    enqueue_plan(store, plan_of({"id": "t"}))
    worker = QueueWorker(store, TEAM, "q1", PythonExecutor(lambda env, ctx: {"ok": True}))
    while worker.poll_once():
        pass
    assert states(store) == {"t": "done"}
    assert [d.message_id for d in store.dead_letters(TEAM)] == [bad]
    logged = [e.data for e in store.events(TEAM) if e.kind == "queue.bad_message"]
    assert [d["deliveries"] for d in logged] == [1, 2, 3, 4, 5]
