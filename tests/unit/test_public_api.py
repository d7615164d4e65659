"""The public API: ``import tenure`` and nothing deeper.

The names are pinned here, so a name that disappears (or a private one that leaks)
fails a test instead of a user's program; then ``Team.run()`` is exercised through
those names only, on a real SQLite file and on ``memory://``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tenure

PUBLIC = [
    "GO",
    "HOLD",
    "AgentCLI",
    "AgentModel",
    "AttemptData",
    "ChatMessage",
    "CodingConfig",
    "CodingLeader",
    "CodingOutcome",
    "CommandExecutor",
    "ConfigError",
    "Conflict",
    "Dispatch",
    "Executor",
    "Follower",
    "FollowerConfig",
    "LLMExecutor",
    "Leader",
    "LeaderConfig",
    "LeaderContext",
    "LeaderHook",
    "LeaseLost",
    "LeaseTiming",
    "Model",
    "ModelError",
    "NotFound",
    "Plan",
    "PlanTask",
    "Planner",
    "ProtocolError",
    "PythonExecutor",
    "QueueWorker",
    "Review",
    "RunResult",
    "ScriptedExecutor",
    "ScriptedModel",
    "Splitter",
    "StaleEpoch",
    "Stop",
    "Store",
    "StoreError",
    "StoreLost",
    "StoreUnavailable",
    "StoreUnreachable",
    "Task",
    "TaskContext",
    "TaskEnvelope",
    "TaskOutcome",
    "TaskResult",
    "Team",
    "TenureError",
    "Trust",
    "allow_model_requests",
    "answer",
    "artifacts_from",
    "cancel",
    "decisions",
    "enqueue_plan",
    "failed",
    "idempotency_key",
    "inbox",
    "json_schema",
    "load_plan",
    "make_result",
    "new_id",
    "open_model",
    "open_store",
    "parse_message",
    "parse_plan",
    "replan",
    "resolve_executor",
    "results",
    "start_over",
    "tasks",
    "to_json",
    "trace_with",
]

TEAM = "api"


# --- the names ----------------------------------------------------------------------------


def test_all_is_exactly_the_pinned_list() -> None:
    """Adding or removing a public name is a decision: make it here, on purpose."""
    assert len(set(PUBLIC)) == len(PUBLIC)
    assert tenure.__all__ == PUBLIC  # in ruff's order (constants first), as __init__ keeps it


def test_every_public_name_resolves_and_none_is_private() -> None:
    for name in tenure.__all__:
        assert not name.startswith("_"), name
        assert getattr(tenure, name) is not None, name


def test_nothing_public_looking_leaks_besides_submodules() -> None:
    """``dir(tenure)``: the ``__all__`` names, dunders and underscores, and the layers
    as submodules (Python binds a package's submodules on it); nothing else."""
    extra = [n for n in dir(tenure) if not n.startswith("_") and n not in tenure.__all__]
    for name in extra:
        value = getattr(tenure, name)
        assert isinstance(value, ModuleType), f"tenure.{name} is public but not in __all__"
        assert value.__name__ == f"tenure.{name}", name


def test_the_version_is_the_installed_distributions() -> None:
    assert tenure.__version__ == importlib.metadata.version("tenure")


def test_errors_share_one_root() -> None:
    for name in ("ProtocolError", "ConfigError", "StoreError", "ModelError"):
        assert issubclass(getattr(tenure, name), tenure.TenureError)
    for name in ("StoreUnavailable", "StaleEpoch", "LeaseLost", "Conflict", "NotFound"):
        assert issubclass(getattr(tenure, name), tenure.StoreError)


# --- Team.run() on both kinds of store ------------------------------------------------------


@pytest.fixture(params=["sqlite", "memory"])
def store_for(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``store=`` as a user passes it: a SQLite URL (opened for each run), or an opened
    memory store (a ``memory://`` URL would be a new empty store every run)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
        assert not (tmp_path / "state.db").exists()
        yield url
        assert (tmp_path / "state.db").is_file()
    else:
        with tenure.open_store("memory://") as store:
            yield store


@contextmanager
def opened(store: Any) -> Iterator[tenure.Store]:
    """The store a test reads after a run: the one given, or the URL opened (and closed)."""
    if isinstance(store, tenure.Store):
        yield store
        return
    with tenure.open_store(store) as reopened:
        yield reopened


def plan(*tasks: dict[str, Any], **extra: Any) -> tenure.Plan:
    return tenure.Plan.model_validate({"team": TEAM, "tasks": list(tasks), **extra})


def fetch(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
    return {"numbers": [3, 4, 5]}


def total(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
    return {"total": sum(envelope.input["from_dependencies"]["fetch"]["numbers"])}


THREE = plan(
    {"id": "fetch", "goal": "fetch the numbers"},
    {"id": "total", "goal": "add them up", "depends_on": ["fetch"]},
    {"id": "note", "goal": "say hello"},
)


def by_task(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
    steps: dict[str, Callable[[tenure.TaskEnvelope, tenure.TaskContext], Any]] = {
        "fetch": fetch,
        "total": total,
        "note": lambda e, c: "hello",
    }
    return steps[envelope.task_id](envelope, ctx)


def test_three_python_functions_finish_with_their_artifacts(store_for: Any) -> None:
    result = tenure.Team(THREE, executor=by_task, store=store_for).run(timeout=30)
    assert result.outcome == "done" and result.ok
    assert (result.done, result.blocked, result.failed, result.cancelled, result.open) == (
        3,
        0,
        0,
        0,
        0,
    )
    assert result.tasks["total"].artifact == {"total": 12}
    assert result.tasks["note"] == tenure.TaskOutcome(
        state="done",
        attempts=1,
        artifact="hello",
        reason=result.tasks["note"].reason,
        spend=result.tasks["note"].spend,
    )
    assert str(result).startswith("api: done (3 done)")
    with pytest.raises(AttributeError):
        result.outcome = "blocked"  # type: ignore[misc]
    with opened(store_for) as store:
        assert tenure.results(store, TEAM) == {
            "fetch": {"numbers": [3, 4, 5]},
            "total": {"total": 12},
            "note": "hello",
        }
        assert {t.task_id: t.state for t in tenure.tasks(store, TEAM)} == {
            "fetch": "done",
            "total": "done",
            "note": "done",
        }


def test_a_routing_mapping_gives_each_task_its_function(store_for: Any) -> None:
    routes = {"fetch": fetch, "total": total, "note": "noop"}
    result = tenure.Team(THREE, executor=routes, store=store_for, workers=3).run(timeout=30)
    assert result.ok
    assert result.tasks["total"].artifact == {"total": 12}
    assert result.tasks["note"].artifact == {"ok": True}


def stubborn(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
    """Fails until a person has answered it; then uses the answer."""
    answers = envelope.input.get("operator_answers")
    if not answers:
        raise RuntimeError("the price list is behind a login")
    return {"price": answers[-1]["answer"]}


def test_a_task_that_keeps_failing_is_blocked_not_done_until_answered(store_for: Any) -> None:
    flaky = plan(
        {"id": "fetch", "goal": "fetch the numbers"},
        {"id": "price", "goal": "find the price", "max_attempts": 2},
        {"id": "after", "goal": "use the price", "depends_on": ["price"]},
    )
    routes = {"fetch": fetch, "price": stubborn, "after": "noop"}
    team = tenure.Team(flaky, executor=routes, store=store_for)

    first = team.run(timeout=30)
    assert first.outcome == "blocked" and not first.ok
    assert (first.done, first.blocked, first.open) == (1, 1, 1)  # "after" waits behind it
    price = first.tasks["price"]
    assert price.state == "blocked" and price.attempts == 2 and price.artifact is None
    assert "gave up after 2 attempts" in price.reason
    assert "the price list is behind a login" in price.reason

    with opened(store_for) as store:
        [waiting] = tenure.inbox(store, [TEAM])
        assert waiting.task.task_id == "price"
        tenure.answer(store, TEAM, "price", "42 USD")

    second = team.run(timeout=30)
    assert second.outcome == "done", second
    assert second.tasks["price"].artifact == {"price": "42 USD"}
    assert second.tasks["after"].state == "done"


def test_a_stopped_run_says_stopped_and_the_next_run_does_not_redo_the_work(
    store_for: Any,
) -> None:
    calls: list[int] = []

    def slow(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
        calls.append(envelope.attempt)
        time.sleep(1.0)  # outlives the run's timeout: its result is recorded all the same
        return "late"

    team = tenure.Team(plan({"id": "slow", "goal": "wait"}), executor=slow, store=store_for)
    first = team.run(timeout=0.3)
    assert first.outcome == "stopped" and first.open == 1 and not first.ok
    second = team.run(timeout=30)
    assert second.ok and second.tasks["slow"].artifact == "late"
    assert calls == [1]  # the second run took the recorded result of attempt 1


def test_a_cancelled_task_is_not_done() -> None:
    with tenure.open_store("memory://") as store:
        one = plan({"id": "a", "goal": "a"}, {"id": "b", "goal": "b", "max_attempts": 1})
        team = tenure.Team(one, executor={"a": "noop", "b": stubborn}, store=store)
        assert team.run(timeout=30).outcome == "blocked"
        tenure.cancel(store, TEAM, "b")
        result = team.run(timeout=30)
        assert (result.outcome, result.cancelled, result.ok) == ("stopped", 1, False)


def test_decisions_read_the_verdicts_of_the_ladder() -> None:
    def counted(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
        return {"n": "three"} if envelope.attempt == 1 else {"n": 3}

    checked = plan(
        {
            "id": "count",
            "goal": "count",
            "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        }
    )
    with tenure.open_store("memory://") as store:
        assert tenure.Team(checked, executor=counted, store=store).run(timeout=30).ok
        verdicts = [d for d in tenure.decisions(store, TEAM) if d.subject == "schema"]
        assert [(d.kind, d.task_id, d.outcome) for d in verdicts] == [
            ("verdict", "count", "failed"),
            ("verdict", "count", "passed"),
        ]
        assert verdicts[0].inputs == ("count:attempt-1",)
        assert tenure.decisions(store, TEAM, "nothing-like-it") == []


# --- refusals, one line each ------------------------------------------------------------


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, tenure.TenureError)
    return text


def test_a_bad_executor_spec_is_one_line() -> None:
    with pytest.raises((tenure.ConfigError, tenure.ProtocolError)) as exc:
        tenure.Team(THREE, executor="teleport:now")
    assert "teleport:now" in one_line(exc) and "command:CMDLINE" in one_line(exc)


def test_a_mapping_that_misses_or_misspells_a_task_is_refused() -> None:
    with pytest.raises(tenure.ConfigError) as exc:
        tenure.Team(THREE, executor={"fetch": fetch, "total": total})
    assert "'note'" in one_line(exc)
    with pytest.raises(tenure.ConfigError) as exc:
        tenure.Team(THREE, executor={"fetch": fetch, "total": total, "ntoe": fetch})
    assert "'ntoe'" in one_line(exc)


def test_a_function_with_the_wrong_arguments_is_refused() -> None:
    def takes_one(task_input: dict[str, Any]) -> Any:
        return task_input

    with pytest.raises(tenure.ConfigError) as exc:
        tenure.Team(THREE, executor=takes_one)
    assert "(envelope, ctx)" in one_line(exc)


def test_a_nested_plan_and_bad_settings_are_refused() -> None:
    nested = plan({"id": "sub", "goal": "g", "team": {"tasks": [{"id": "x", "goal": "x"}]}})
    with pytest.raises(tenure.ConfigError) as exc:
        tenure.Team(nested, executor="noop")
    assert "tenure run" in one_line(exc)
    with pytest.raises(tenure.ConfigError):
        tenure.Team(THREE, executor="noop", workers=0)
    with pytest.raises(tenure.ConfigError) as exc:
        tenure.Team(plan({"id": "a", "goal": "a", "options": {"quorom": 3}}), executor="noop")
    assert "quorom" in one_line(exc)


def test_a_plan_file_path_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("team: file\ntasks:\n  - {id: a, goal: do a}\n")
    with tenure.open_store("memory://") as store:
        result = tenure.Team(tmp_path / "plan.yaml", executor="noop", store=store).run(30)
    assert result.team == "file" and result.ok


# --- the examples use these names only -------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_examples_import_nothing_but_the_public_api() -> None:
    found = []
    for path in sorted(EXAMPLES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{path.relative_to(EXAMPLES)}: {n}" for n in names if n.startswith("tenure.")]
    assert found == []


# --- the docs use these names only -----------------------------------------------------------

ROOT = EXAMPLES.parent
INTERNAL = re.compile(
    r"`tenure\.(?:roles|protocol|store|executors|models|verify|coord|console|observe)\.[\w.]*"
)


def test_the_docs_show_nothing_but_the_public_api() -> None:
    """Every Python block in docs/ and the README imports ``tenure`` alone and uses only
    names in ``tenure.__all__``; no prose sends a reader to ``tenure.<layer>.<name>``
    (where a page names the code behind a feature, it gives the file's path)."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        found += [f"{where}: {m.group(0)}" for m in INTERNAL.finditer(text)]
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tenure"):
                    found.append(f"{where}: from {node.module} import ...")
                elif isinstance(node, ast.Import):
                    found += [f"{where}: import {a.name}" for a in node.names if "tenure." in a.name]
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "tenure"
                    and node.attr not in tenure.__all__
                ):
                    found.append(f"{where}: tenure.{node.attr}")
    assert found == []
