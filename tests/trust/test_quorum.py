"""Quorum in the real runtime: n independent executions on distinct workers, compared,
counted, and flagged when the voters' errors are likely to correlate."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tenure.console.cli import app
from tenure.executors import TaskContext
from tenure.protocol import TaskEnvelope
from tenure.store import Store

from .harness import TEAM, Crew, Recording, events, plan_of, states, task

WORKERS = ("w1", "w2", "w3")


def quorum_plan(k: int, n: int, **check: Any) -> Any:
    return plan_of(
        {
            "id": "capital",
            "goal": "name the capital of Australia",
            "acceptance_criteria": ["the capital city, one word"],
            "max_attempts": 2,
            "checks": [{"kind": "quorum", "k": k, "n": n, **check}],
        }
    )


def crew_of(store: Store, tmp_path: Path, plan: Any, executor: Recording) -> Crew:
    crew = Crew(store, tmp_path, plan)
    for member in WORKERS:
        crew.hire(member, executor)
    return crew


def test_three_voters_on_one_model_agree_and_the_log_and_cli_warn(
    store: Store, tmp_path: Path
) -> None:
    def voter(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        return {
            "status": "completed",
            "artifact": {"capital": "Sydney"},  # the same confident wrong answer
            "usage": {"model": "openai:gpt-4.1", "calls": 1},
        }

    executor = Recording(voter)
    crew_of(store, tmp_path, quorum_plan(2, 3), executor).run()
    assert task(store, "capital").state == "done"
    # three independent executions on three distinct workers
    assert sorted(executor.workers_for("capital")) == list(WORKERS)
    assert {env.task_id for _, env in executor.calls} == {
        "capital.q1.v1",
        "capital.q1.v2",
        "capital.q1.v3",
    }
    (count,) = events(store, "decision", "capital")
    assert count.data["outcome"] == "winner"
    assert "3 of 3 agree" in count.data["reason"]
    (warning,) = count.data["warnings"]
    assert "3 voters share the model openai:gpt-4.1" in warning
    assert "correlate" in warning
    verdict = events(store, "verify.verdict", "capital")[-1]
    assert verdict.data["check"] == "quorum"
    assert verdict.data["passed"] is True
    assert verdict.data["warnings"] == [warning]
    # and the operator sees it
    url = f"sqlite:///{tmp_path / 'state.db'}"
    shown = CliRunner().invoke(
        app, ["decisions", "capital", "--team", "trust", "--store", url], env={"COLUMNS": "250"}
    )
    assert shown.exit_code == 0, shown.output
    assert "warning:" in shown.output
    assert "share the model openai:gpt-4.1" in shown.output
    assert "quorum count" in shown.output
    logged = CliRunner().invoke(app, ["log", "--team", "trust", "--store", url])
    assert "share the model openai:gpt-4.1" in logged.output


def test_voters_from_different_providers_raise_no_warning(store: Store, tmp_path: Path) -> None:
    models = {"w1": "openai:gpt-4.1", "w2": "anthropic:claude-sonnet-4-5", "w3": "ollama:qwen"}

    def voter(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        return {
            "status": "completed",
            "artifact": {"capital": "Canberra"},
            "usage": {"model": models[ctx.worker_id]},
        }

    crew_of(store, tmp_path, quorum_plan(3, 3), Recording(voter)).run()
    assert task(store, "capital").state == "done"
    (count,) = events(store, "decision", "capital")
    assert count.data["warnings"] == []


def test_two_models_of_one_provider_are_warned_about(store: Store, tmp_path: Path) -> None:
    models = {"w1": "openai:gpt-4.1", "w2": "openai:gpt-4.1-mini", "w3": "anthropic:claude"}

    def voter(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        return {
            "status": "completed",
            "artifact": "Canberra",
            "usage": {"model": models[ctx.worker_id]},
        }

    crew_of(store, tmp_path, quorum_plan(2, 3), Recording(voter)).run()
    (count,) = events(store, "decision", "capital")
    assert any("one provider, openai" in w for w in count.data["warnings"])


def test_a_missed_quorum_is_retried_with_the_disagreement_as_failure_output(
    store: Store, tmp_path: Path
) -> None:
    def voter(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        if env.history:  # round 2: everyone looked again
            return {"capital": "Canberra"}
        return {"capital": {"w1": "Sydney", "w2": "Canberra", "w3": "Melbourne"}[ctx.worker_id]}

    executor = Recording(voter)
    crew_of(store, tmp_path, quorum_plan(2, 3), executor).run()
    record = task(store, "capital")
    assert record.state == "done"
    assert record.attempt == 2
    assert record.result is not None
    assert record.result["artifact"] == {"capital": "Canberra"}
    round_two = [env for _, env in executor.calls if env.task_id.startswith("capital.q2.")]
    assert len(round_two) == 3
    failure = round_two[0].history[0].failure
    assert "quorum check failed" in failure
    assert "only 1 of 3 agree, 2 needed" in failure
    assert "no tie-break policy" in failure
    outcomes = [e.data["outcome"] for e in events(store, "decision", "capital")]
    assert outcomes == ["undecided", "winner"]


def test_the_json_comparator_ignores_spacing_key_order_and_number_form(
    store: Store, tmp_path: Path
) -> None:
    answers = {
        "w1": '{"price": 100, "currency": "USD"}',
        "w2": {"currency": "USD", "price": 100.0},
        "w3": '{ "currency":"USD","price":1e2 }',
    }

    def voter(env: TaskEnvelope, ctx: TaskContext) -> Any:
        return {"status": "completed", "artifact": answers[ctx.worker_id]}

    crew_of(store, tmp_path, quorum_plan(3, 3, comparator="json"), Recording(voter)).run()
    assert task(store, "capital").state == "done"


def test_the_exact_comparator_does_not(store: Store, tmp_path: Path) -> None:
    answers = {"w1": {"price": 100}, "w2": {"price": 100.0}, "w3": '{"price": 100}'}

    def voter(env: TaskEnvelope, ctx: TaskContext) -> Any:
        return {"status": "completed", "artifact": answers[ctx.worker_id]}

    crew_of(store, tmp_path, quorum_plan(2, 3), Recording(voter)).run()
    assert task(store, "capital").state == "blocked"


def test_a_voter_that_fails_its_own_checks_does_not_vote(store: Store, tmp_path: Path) -> None:
    def voter(env: TaskEnvelope, ctx: TaskContext) -> Any:
        return {"capital": 42} if ctx.worker_id == "w1" else {"capital": "Canberra"}

    plan = plan_of(
        {
            "id": "capital",
            "max_attempts": 1,
            "checks": [
                {"kind": "quorum", "k": 2, "n": 3},
                {
                    "kind": "schema",
                    "schema": {"type": "object", "properties": {"capital": {"type": "string"}}},
                },
            ],
        }
    )
    crew_of(store, tmp_path, plan, Recording(voter)).run()
    final = states(store)
    assert final["capital"] == "done"
    rejected = [t for t, s in final.items() if s == "cancelled"]
    assert len(rejected) == 1, final  # the bad vote left the inbox when the round was counted
    (count,) = events(store, "decision", "capital")
    assert "2 of 2 agree" in count.data["reason"]
    assert "not accepted" in count.data["reason"]


def drive(crew: Crew, seconds: float) -> None:
    """Run the crew's rounds until it is finished or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        crew.conductor.tick()
        if crew.conductor.finished():
            return
        for follower in crew.followers.values():
            while follower.poll_once():
                pass
        time.sleep(0.02)
    raise AssertionError(f"not finished in {seconds}s: {states(crew.store)}")


def test_with_fewer_workers_than_voters_no_worker_votes_twice_and_a_person_is_asked(
    store: Store, tmp_path: Path
) -> None:
    from tenure.roles.teams.inbox import answer

    executor = Recording(lambda env, ctx: {"capital": "Sydney"})
    crew = Crew(store, tmp_path, quorum_plan(2, 2, wait_seconds=0.3))
    crew.hire("solo", executor)
    drive(crew, 10)
    record = task(store, "capital")
    assert record.state == "blocked"
    assert "quorum needs 2 distinct workers (one vote each), the team has 1 (solo)" in (
        record.reason
    )
    assert "wait_seconds 0.3" in record.reason and "start more workers" in record.reason
    assert record.data["question"] == record.reason
    assert executor.workers_for("capital") == ["solo"]  # one vote, never a second from solo
    assert states(store)["capital.q1.v2"] == "cancelled"
    assert events(store, "decision", "capital") == []  # nothing was counted
    assert events(store, "quorum.short", "capital")
    # a second worker joins, the operator answers: the next round has two distinct voters
    crew.hire("second", Recording(lambda env, ctx: {"capital": "Sydney"}))
    answer(store, TEAM, "capital", "a second worker has joined")
    drive(crew, 10)
    assert task(store, "capital").state == "done"
    (count,) = events(store, "decision", "capital")
    assert count.data["round"] == 2
    assert sorted(c["member"] for c in count.data["inputs"]) == ["second", "solo"]
    assert not any("from one worker" in w for w in count.data["warnings"])


def test_voters_wait_for_workers_that_join_late_and_each_votes_once(
    store: Store, tmp_path: Path
) -> None:
    """The first worker is up before the others: its wrong answer is one vote, not three."""
    answers = {"w1": "Sydney", "w2": "Canberra", "w3": "Canberra"}
    executor = Recording(lambda env, ctx: {"capital": answers[ctx.worker_id]})
    crew = Crew(store, tmp_path, quorum_plan(2, 3, wait_seconds=30))
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def join_later(member: str, delay: float) -> None:
        time.sleep(delay)
        crew.hire(member, executor)
        follower = crew.followers.pop(member)  # this one polls on its own thread
        follower.run(stop)

    for member, delay in (("w1", 0.0), ("w2", 0.6), ("w3", 1.2)):
        thread = threading.Thread(target=join_later, args=(member, delay), daemon=True)
        thread.start()
        threads.append(thread)
    try:
        drive(crew, 20)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert task(store, "capital").state == "done"
    voters = {env.task_id: worker for worker, env in executor.calls}
    assert sorted(voters) == ["capital.q1.v1", "capital.q1.v2", "capital.q1.v3"]
    assert sorted(voters.values()) == ["w1", "w2", "w3"]  # three votes, three workers
    (count,) = events(store, "decision", "capital")
    assert "2 of 3 agree" in count.data["reason"]
    assert task(store, "capital").result["artifact"] == {"capital": "Canberra"}
    assert not any("from one worker" in w for w in count.data["warnings"])


def test_two_votes_of_one_worker_are_never_counted_twice() -> None:
    from tenure.verify import Candidate, distinct_votes, majority
    from tenure.verify.quorum import exact_key

    twice = [
        Candidate("v1", "Sydney", member="w1"),
        Candidate("v2", "Sydney", member="w1"),
        Candidate("v3", "Canberra", member="w2"),
    ]
    kept, dropped = distinct_votes(twice)
    assert [c.ref for c in kept] == ["v1", "v3"] and [c.ref for c in dropped] == ["v2"]
    counted = majority(twice, 2, exact_key)
    assert counted.winner is None
    assert "only 1 of 2 agree" in counted.reason
    assert "v2 is not counted: its worker w1 voted already" in counted.warnings


def test_a_new_leader_settles_a_round_its_predecessor_started(
    store: Store, tmp_path: Path, monkeypatch: Any
) -> None:
    """The old leader dies between counting the votes and reviewing the task: its
    successor reviews the stored outcome — it neither loses the round nor runs it twice."""
    from tenure.coord import LeaseKeeper, LeaseTiming
    from tenure.protocol import LeaseLost
    from tenure.roles import Conductor
    from tenure.roles.features import standard_hooks
    from tenure.roles.features.quorum import hook as quorum_module

    executor = Recording(lambda env, ctx: {"capital": "Canberra"})
    crew = crew_of(store, tmp_path, quorum_plan(2, 3), executor)
    real_review = quorum_module._review

    def dies(conductor: Any, record: Any) -> None:
        raise LeaseLost("the old leader stopped here")

    monkeypatch.setattr(quorum_module, "_review", dies)
    try:
        crew.run(rounds=10)
    except LeaseLost:
        pass
    assert task(store, "capital").state == "running"  # counted, not yet reviewed
    crew.keeper.release()
    monkeypatch.setattr(quorum_module, "_review", real_review)
    keeper = LeaseKeeper(store, "trust", "leader-2", LeaseTiming(ttl=30.0))
    keeper.claim()
    successor = Conductor(
        store, "trust", "leader-2", keeper.check, workdir=tmp_path, hooks=standard_hooks()
    )
    successor.adopt()
    successor.tick()
    assert task(store, "capital").state == "done"
    assert len(executor.calls) == 3, "a vote ran twice"
    assert len(events(store, "decision", "capital")) == 1, "the round was counted twice"


def test_a_local_team_of_threads_runs_a_quorum_end_to_end(store: Store, tmp_path: Path) -> None:

    from tenure.coord import LeaseTiming
    from tenure.roles.teams.local import LocalTeam

    executor = Recording(lambda env, ctx: {"capital": "Canberra"})
    team = LocalTeam(
        store,
        quorum_plan(3, 3),
        executor,
        workers=3,
        timing=LeaseTiming(ttl=10.0),
        state_dir=tmp_path / "state",
        workdir=tmp_path,
    )
    assert team.run(timeout=20.0) == "settled"
    assert task(store, "capital").state == "done"
    assert sorted(executor.workers_for("capital")) == ["worker-1", "worker-2", "worker-3"]
