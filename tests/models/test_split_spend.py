"""A split is paid for whether or not it works: the planner's calls of a split that fails
are charged to the task (``kind: split``) and count in the team's spend. The planner
talks to the local wire server through the real SDK."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenure.coord import LeaseTiming
from tenure.executors.llm import LLMExecutor
from tenure.models import Price, PriceTable, ScriptedModel, open_model
from tenure.protocol import Plan, PlanTask
from tenure.roles.coding.split import CodingSplits, PlannerSplit
from tenure.roles.features.split import Splitter
from tenure.roles.planning import PlanningFailed
from tenure.roles.planning.planner import Artifact, Planner
from tenure.roles.register import read_task
from tenure.roles.register.spend import task_totals, team_totals
from tenure.roles.teams.local import LocalTeam
from tenure.store import Store, open_store

from .conftest import ServerFactory
from .wire_server import answer

FAIL = {"status": "failed", "notes": {"uncertain": ["could not find it"]}}
TASK = {
    "id": "report",
    "goal": "Summarise the page.",
    "input": {"page": "docs/a.txt"},
    "scope": ["out/"],
    "max_attempts": 1,
}
INVENTED = {  # every try names a file the team does not have: rejected each time
    "tasks": [
        {"id": "a", "goal": "Summarise a.", "input": {"page": "docs/a.txt"}},
        {"id": "z", "goal": "Summarise z.", "input": {"page": "docs/zeta.txt"}},
    ]
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Page A.")
    opened = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    yield opened
    opened.close()


def run(store: Store, tmp_path: Path, splitter: Any) -> None:
    team = LocalTeam(
        store,
        Plan.model_validate({"team": "t", "tasks": [TASK]}),
        LLMExecutor(ScriptedModel([FAIL])),
        workers=1,
        timing=LeaseTiming(ttl=5.0),
        state_dir=tmp_path / "state",
        workdir=tmp_path,
        splitter=splitter,
    )
    stop = threading.Event()
    timer = threading.Timer(20, stop.set)
    timer.start()
    try:
        assert team.run(stop) == "settled"
    finally:
        timer.cancel()


def test_a_split_that_fails_still_charges_its_planner_calls(
    wire: ServerFactory, store: Store, tmp_path: Path
) -> None:
    server = wire([answer(INVENTED)])
    prices = PriceTable({"openai:planner": Price(1.0, 2.0)})
    model = open_model(f"openai:planner@{server.openai_url}", max_retries=0, prices=prices)
    run(store, tmp_path, Splitter(Planner(model), [Artifact("docs/a.txt")]))

    record = read_task(store.get_task("t", "report"))
    assert record.state == "blocked"
    assert "could not split" in (record.reason or "")
    assert len(server.requests) == 3  # three tries, all rejected
    calls = [e.data for e in store.events("t", limit=5000) if e.kind == "planner.call"]
    assert len(calls) == 3
    [split] = [e for e in record.data.spend_log if e.kind == "split"]
    assert split.calls == 3
    assert split.input_tokens == sum(c["input_tokens"] for c in calls) > 0
    assert split.output_tokens == sum(c["output_tokens"] for c in calls)
    assert split.cost_usd == pytest.approx(sum(c["cost_usd"] for c in calls)) and split.cost_usd > 0
    totals = task_totals(record)
    assert totals.tokens >= split.tokens and totals.calls == 1 + 3  # the attempt and the tries
    tasks = [read_task(t) for t in store.tasks("t")]
    assert team_totals(tasks).tokens == totals.tokens


def test_a_planner_that_errors_charges_the_tries_it_made(
    wire: ServerFactory, store: Store, tmp_path: Path
) -> None:
    from .wire_server import error

    server = wire([answer(INVENTED), error(401, "key revoked")])
    model = open_model(f"openai:planner@{server.openai_url}", max_retries=0)
    run(store, tmp_path, Splitter(Planner(model), [Artifact("docs/a.txt")]))
    record = read_task(store.get_task("t", "report"))
    assert record.state == "blocked"
    [split] = [e for e in record.data.spend_log if e.kind == "split"]
    assert split.calls == 1 and split.input_tokens > 0  # the one answer before the error


def test_a_coding_split_whose_parts_do_not_fit_carries_what_it_cost(tmp_path: Path) -> None:
    escape = {
        "tasks": [
            {"id": "x", "goal": "escape", "scope": ["elsewhere.py"], "input": {"file": "m1.py"}},
            {"id": "y", "goal": "stay", "scope": ["m1.py"], "input": {"file": "m1.py"}},
        ]
    }
    (tmp_path / "m1.py").write_text("")
    splits = CodingSplits(PlannerSplit(Planner(ScriptedModel([escape])), tmp_path))
    parent = PlanTask(id="t1", goal="fix m1", scope=["m1.py"], input={"file": "m1.py"})
    with pytest.raises(PlanningFailed) as caught:
        splits.parts_for(parent, [], taken=set(), log=lambda kind, data: None)
    assert caught.value.spend is not None and caught.value.spend.calls >= 1
