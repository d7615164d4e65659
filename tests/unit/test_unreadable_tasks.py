"""A register entry that cannot be read is set aside, never overwritten: the operator's
answers and the spend log stay in the store, and ``answer``/``cancel`` on such a task
say why in one line instead of writing. A real SQLite file, edited as a person would."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import tenure

TEAM = "aside"
PLAN = tenure.parse_plan(
    f"team: {TEAM}\ntasks:\n  - {{id: ask, goal: Ask first., max_attempts: 1}}\n"
)


def asks(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
    """Asks until a person has answered twice."""
    if len(envelope.input.get("operator_answers", [])) < 2:
        return {"status": "blocked", "question": "which currency?"}
    return "priced"


def raw(db: Path, column: str) -> dict[str, Any]:
    with closing(sqlite3.connect(db)) as conn, conn:  # closed, and committed
        (text,) = conn.execute(
            f"SELECT {column} FROM tasks WHERE team = ? AND task_id = 'ask'", (TEAM,)
        ).fetchone()
    value: dict[str, Any] = json.loads(text)
    return value


def edit(db: Path, column: str, change: dict[str, Any]) -> None:
    """What a person (or a stray program) does to the register behind Tenure's back."""
    with closing(sqlite3.connect(db)) as conn, conn:  # closed, and committed
        conn.execute(
            f"UPDATE tasks SET {column} = ? WHERE team = ? AND task_id = 'ask'",
            (json.dumps({**raw(db, column), **change}), TEAM),
        )


@pytest.fixture
def answered_once(tmp_path: Path) -> Path:
    """A task that asked, was answered once, ran again and asked again: its data holds
    an answer and the log of two attempts."""
    db = tmp_path / "state.db"
    with tenure.open_store(f"sqlite:///{db}") as store:
        team = tenure.Team(PLAN, executor=asks, store=store, workers=1)
        assert team.run(timeout=30).outcome == "blocked"
        tenure.answer(store, TEAM, "ask", "EUR")
        assert team.run(timeout=30).outcome == "blocked"
    data = raw(db, "data")
    assert len(data["qa"]) == 1 and data["spend_log"], data
    return db


def test_answering_a_task_whose_spec_cannot_be_read_writes_nothing(answered_once: Path) -> None:
    db = answered_once
    edit(db, "spec", {"deadline_secnds": 5})
    before = raw(db, "data")
    with tenure.open_store(f"sqlite:///{db}") as store:
        [waiting] = tenure.inbox(store, [TEAM])
        assert waiting.task.data.qa == waiting.task.data.qa[:1] != []  # its data is still read
        for act in (
            lambda: tenure.answer(store, TEAM, "ask", "USD"),
            lambda: tenure.cancel(store, TEAM, "ask"),
        ):
            with pytest.raises(tenure.ConfigError) as exc:
                act()
            line = str(exc.value)
            assert "\n" not in line and "deadline_secnds" in line and "nothing was written" in line
        assert store.get_task(TEAM, "ask").state == "blocked"
    assert raw(db, "data") == before


@pytest.mark.parametrize("column", ["spec", "data"])
def test_a_leader_sets_an_unreadable_task_aside_keeping_its_data(
    answered_once: Path, column: str
) -> None:
    db = answered_once
    with tenure.open_store(f"sqlite:///{db}") as store:
        tenure.answer(store, TEAM, "ask", "EUR, really")  # queued again, with two answers
    typo = {"deadline_secnds": 5} if column == "spec" else {"answerz": []}
    edit(db, column, typo)
    before = raw(db, "data")
    with tenure.open_store(f"sqlite:///{db}") as store:
        result = tenure.Team(PLAN, executor=asks, store=store, workers=1).run(timeout=30)
        assert result.outcome == "blocked"
        assert "cannot build its envelope" in result.tasks["ask"].reason
        assert next(iter(typo)) in result.tasks["ask"].reason
        kinds = [e.kind for e in store.events(TEAM, limit=5000)]
        assert "leader.unreadable_task" in kinds
    assert raw(db, "data") == before  # answers and spend log as they were
