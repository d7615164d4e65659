"""The ladder in the real runtime: the verifier's own checks beat the worker's word."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tenure.coord import LeaseTiming
from tenure.executors import TaskContext
from tenure.models import ChatMessage, ScriptedModel
from tenure.protocol import PriorAttempt, TaskEnvelope
from tenure.roles.teams.local import LocalTeam
from tenure.store import Store
from tenure.verify import Trust

from .harness import TEAM, Crew, Recording, events, plan_of, states, task

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add\n"
    "assert add(2, 2) == 4, f'add(2, 2) returned {add(2, 2)}, expected 4'\n"
    "print('1 test passed')\n"
)


def test_a_worker_claiming_tests_pass_is_rejected_until_the_command_passes(
    store: Store, tmp_path: Path
) -> None:
    """The worker says "tests pass" without running them; the leader runs them itself."""
    (tmp_path / "calc.py").write_text(BUGGY)
    (tmp_path / "test_calc.py").write_text(TESTS)
    seen: list[TaskEnvelope] = []

    def coder(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        seen.append(env)
        if env.history:  # the failure output came back: now do the work for real
            (tmp_path / "calc.py").write_text(FIXED)
        return {
            "status": "completed",
            "artifact": {"changed": ["calc.py"]},
            "notes": {"verified": ["ran the tests: all tests pass"]},
            "evidence": [{"kind": "command", "command": "pytest", "exit_code": 0}],
        }

    plan = plan_of(
        {
            "id": "fix-add",
            "goal": "make add() add",
            "checks": [{"kind": "command", "run": f"{sys.executable} test_calc.py"}],
        }
    )
    team = LocalTeam(
        store,
        plan,
        Recording(coder),
        workers=1,
        timing=LeaseTiming(ttl=10.0),
        state_dir=tmp_path / "state",
        workdir=tmp_path,
    )
    assert team.run(timeout=20.0) == "settled"

    record = task(store, "fix-add")
    assert record.state == "done"
    assert record.attempt == 2, "accepted on the worker's word"
    # the failure output of the verifier's own run is what the next attempt saw
    assert len(seen) == 2
    history = seen[1].history
    assert [h.attempt for h in history] == [1]
    assert "command check failed" in history[0].failure
    assert "add(2, 2) returned 0, expected 4" in history[0].failure
    verdicts = [(e.data["key"], e.data["passed"]) for e in events(store, "verify.verdict")]
    assert verdicts == [("fix-add:attempt-1", False), ("fix-add:attempt-2", True)]
    # the worker's claim against the check is a logged decision, decided by authority
    (claim,) = events(store, "decision", "fix-add")
    assert claim.data["policy"] == "authority"
    assert claim.data["winner"] == "check:command"
    assert claim.data["stage"] == "authority"
    assert "ran the tests: all tests pass" in claim.data["reason"]
    assert [i["ref"] for i in claim.data["inputs"]] == ["fix-add:attempt-1", "check:command"]


def test_a_task_with_a_check_is_never_accepted_on_a_bare_self_report(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of(
        {"id": "bare"},
        {"id": "checked", "max_attempts": 2, "checks": [{"kind": "command", "run": "false"}]},
    )
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", Recording(lambda env, ctx: {"ok": True}))
    crew.run()
    assert states(store) == {"bare": "done", "checked": "blocked"}
    bare = events(store, "verify.verdict", "bare")
    assert [(e.data["check"], e.data["passed"]) for e in bare] == [("self-report", True)]
    checked = events(store, "verify.verdict", "checked")
    assert {e.data["check"] for e in checked} == {"command"}
    assert not any(e.data["passed"] for e in checked)


def test_the_judge_grades_criteria_first_without_the_workers_identity_or_word(
    store: Store, tmp_path: Path
) -> None:
    grades = iter([0.2, 0.9])

    def grader(messages: list[ChatMessage]) -> dict[str, Any]:
        return {"score": next(grades), "reason": "checked against each criterion"}

    judge = ScriptedModel(grader, name="grader", provider="scripted")

    def writer(env: TaskEnvelope, ctx: TaskContext) -> dict[str, Any]:
        return {
            "status": "completed",
            "artifact": {"summary": f"draft {env.attempt}"},
            "confidence": 0.99,
            "notes": {"verified": ["SELF-CHECK: this is excellent work"]},
        }

    plan = plan_of(
        {
            "id": "summary",
            "acceptance_criteria": ["names the vendor", "states the price in USD"],
            "checks": [{"kind": "judge", "pass_threshold": 0.7}],
        }
    )
    crew = Crew(store, tmp_path, plan, trust=Trust(judge=judge))
    crew.hire("worker-alice", Recording(writer))
    crew.run()
    assert task(store, "summary").state == "done"
    assert task(store, "summary").attempt == 2
    first = PriorAttempt.model_validate(task(store, "summary").data["history"][0])
    assert "judge check failed" in first.failure
    assert "0.20" in first.failure
    assert len(judge.calls) == 2
    for conversation in judge.calls:
        text = "\n".join(m.content for m in conversation)
        assert text.index("names the vendor") < text.index("draft"), "criteria must come first"
        assert "worker-alice" not in text
        assert "SELF-CHECK" not in text
        assert "0.99" not in text
        assert "history" not in text.lower()
    verdicts = events(store, "verify.verdict", "summary")
    assert [e.data["passed"] for e in verdicts] == [False, True]
    assert verdicts[1].data["evidence"]["model"] == "scripted:grader"


def test_the_ladder_runs_weakest_first_and_stops_at_the_first_failure(
    store: Store, tmp_path: Path
) -> None:
    judge = ScriptedModel([{"score": 1.0, "reason": "fine"}])
    plan = plan_of(
        {
            "id": "t",
            "max_attempts": 1,
            "acceptance_criteria": ["has a price"],
            "checks": [
                {"kind": "command", "run": f"touch {tmp_path / 'ran'}"},
                {"kind": "judge"},
                {"kind": "schema", "schema": {"type": "object", "required": ["price"]}},
            ],
        }
    )
    crew = Crew(store, tmp_path, plan, trust=Trust(judge=judge))
    crew.hire("w1", Recording(lambda env, ctx: {"cost": 3}))
    crew.run()
    assert states(store) == {"t": "blocked"}
    checks = [(e.data["check"], e.data["passed"]) for e in events(store, "verify.verdict")]
    assert checks == [("schema", False)]
    assert judge.calls == [], "a stronger rung ran after a weaker one failed"
    assert not (tmp_path / "ran").exists()
    assert task(store, "t").reason.startswith("gave up after 1 attempt: schema check failed")


def test_every_verdict_is_an_event_with_its_input_by_reference(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "t", "checks": [{"kind": "command", "run": "echo checked"}]})
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", Recording(lambda env, ctx: {"ok": 1}))
    crew.run()
    (verdict,) = events(store, "verify.verdict", "t")
    assert verdict.data["inputs"] == ["t:attempt-1"]
    assert verdict.data["evidence"]["command"] == "echo checked"
    assert verdict.data["evidence"]["exit_code"] == 0
    assert verdict.epoch is not None
    assert verdict.team == TEAM
