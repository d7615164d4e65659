"""``tenure decisions [TASK]``: the decision log, readable, from a real store."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tenure.console.cli import app
from tenure.store import Store, open_store

from .harness import TEAM, Crew, Recording, plan_of
from .test_policies import run_price_team


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.output


def test_decisions_shows_verdicts_and_tie_breaks_with_inputs_policy_outcome_reason(
    store: Store, tmp_path: Path
) -> None:
    run_price_team(store, tmp_path, {"chain": ["freshest", "human"]})
    url = f"sqlite:///{tmp_path / 'state.db'}"
    code, output = invoke("decisions", "acme-price", "--team", TEAM, "--store", url)
    assert code == 0, output
    for text in (
        "quorum count",  # the count of the voters' answers
        "tie-break",  # the policy's decision
        "policy chain",
        "step freshest: winner",
        "acme-price.q1.v1:attempt-1",  # inputs by reference
        "w-senior",
        "openai:gpt-4.1",
        '{"currency": "USD", "price": 100}',
        "verdict: quorum check",
        "winner",
        "why:",
    ):
        assert text in output, f"{text!r} missing from:\n{output}"
    # the voters' own verdicts are listed under the task they vote for
    assert "acme-price.q1.v2" in output


def test_decisions_without_a_task_lists_every_task_and_json_is_one_event_per_line(
    store: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "a"}, {"id": "b", "checks": [{"kind": "command", "run": "true"}]})
    crew = Crew(store, tmp_path, plan)
    crew.hire("w1", Recording(lambda env, ctx: {"ok": 1}))
    crew.run()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    code, output = invoke("decisions", "--store", url)
    assert code == 0, output
    assert "self-report" in output and "command" in output
    code, output = invoke("decisions", "b", "--store", url, "--team", TEAM, "--json")
    assert code == 0, output
    lines = json.loads(output)["decisions"]
    assert [(e["kind"], e["data"]["check"]) for e in lines] == [("verify.verdict", "command")]


def test_decisions_for_an_unknown_task_names_the_known_ones(store: Store, tmp_path: Path) -> None:
    crew = Crew(store, tmp_path, plan_of({"id": "real"}))
    crew.hire("w1", Recording(lambda env, ctx: {"ok": 1}))
    crew.run()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    code, output = invoke("decisions", "nope", "--team", TEAM, "--store", url)
    assert code == 1
    assert "has no task 'nope'" in output
    assert "real" in output


def test_decisions_on_an_empty_store_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(url).close()
    code, output = invoke("decisions", "--store", url)
    assert code == 0, output
    assert "no verdicts or tie-breaks" in output


def test_decisions_without_a_store_says_so_and_creates_none(tmp_path: Path) -> None:
    code, output = invoke("decisions", "--store", f"sqlite:///{tmp_path / 'absent.db'}")
    assert code == 1
    assert "no store at" in output
    assert list(tmp_path.iterdir()) == []
