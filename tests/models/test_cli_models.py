"""Bad model settings on the command line: one clear line saying what to set, exit 1,
and nothing started. And ``tenure plan`` against the local wire-format server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenure.models import guard
from tenure.protocol import load_plan
from tenure.store import open_store

from .conftest import ServerFactory
from .wire_server import answer, text

PLAN = """\
team: cli
tasks:
  - id: one
    goal: say hello
"""
COSTED = PLAN.replace("team: cli\n", "team: cli\nbudget: {cost_usd: 1.0}\n")


def tenure(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("TENURE_", "OPENAI", "ANTHROPIC"))
    }
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "COLUMNS": "200", "NO_COLOR": "1", **env},
    )


def tenure_here(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> subprocess.CompletedProcess[str]:
    """``tenure ARGS`` in this process (same entry point, same error handling), for speed."""
    from tenure.console.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["tenure", *args])
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    with pytest.raises(SystemExit) as caught:
        main()
    captured = capsys.readouterr()
    code = caught.value.code if isinstance(caught.value.code, int) else 1
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "costed.yaml").write_text(COSTED)
    (tmp_path / "notes.txt").write_text("hello")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--exec", "llm"], "no model configured: set TENURE_MODEL"),
        (["--exec", "llm:foo:bar"], "unknown model provider 'foo'"),
        (["--exec", "llm:openai:gpt-4.1"], "OPENAI_API_KEY is not set: export it"),
        (["--exec", "llm:anthropic:claude-sonnet-4-5"], "ANTHROPIC_API_KEY is not set"),
        (
            ["--exec", "llm:openai:m@http://127.0.0.1:9/v1"],
            "cannot reach the model server at http://127.0.0.1:9/v1",
        ),
    ],
)
def test_tenure_run_refuses_bad_model_settings_before_any_work(
    cwd: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = f"sqlite:///{cwd / 'state.db'}"
    proc = tenure_here(cwd, monkeypatch, capsys, "run", "plan.yaml", "--store", store, *args)
    line = one_error_line(proc)
    assert message in line
    with open_store(store) as opened:
        assert opened.tasks("cli") == []  # nothing registered, nothing dispatched


def test_the_real_command_prints_one_line(cwd: Path) -> None:
    line = one_error_line(tenure(cwd, "run", "plan.yaml", "--exec", "llm:nope:m"))
    assert "unknown model provider 'nope'" in line


def test_planning_without_a_model_is_one_line(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = tenure_here(
        cwd, monkeypatch, capsys, "run", "--goal", "say hello", "--artifact", "notes.txt"
    )
    line = one_error_line(proc)
    assert "no model configured: set TENURE_MODEL" in line and "--model" in line


def test_a_worker_with_an_unusable_model_says_so_before_joining(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{cwd / 's.db'}"
    line = one_error_line(
        tenure_here(cwd, monkeypatch, capsys, "worker", "--exec", "llm", "--store", store)
    )
    assert "no model configured" in line


def test_a_cost_budget_on_an_unpriced_model_is_refused_up_front(
    cwd: Path,
    wire: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = wire([answer({"status": "completed"})])
    line = one_error_line(
        tenure_here(
            cwd,
            monkeypatch,
            capsys,
            "run",
            "costed.yaml",
            "--store",
            f"sqlite:///{cwd / 'state.db'}",
            "--exec",
            f"llm:openai:mystery@{server.openai_url}",
        )
    )
    assert "a cost budget is set but the price table has no price for openai:mystery" in line
    assert server.requests == []


def test_tenure_plan_writes_a_validated_plan(cwd: Path, wire: ServerFactory) -> None:
    good = {"tasks": [{"id": "greet", "goal": "Say hello.", "input": {"notes": "notes.txt"}}]}
    invented = {"tasks": [{"id": "greet", "goal": "Say hello.", "input": {"notes": "x.txt"}}]}
    server = wire([text("thinking..."), answer(invented), answer(good)])
    proc = tenure(
        cwd,
        "plan",
        "--goal",
        "Say hello.",
        "--artifact",
        "notes.txt",
        "--model",
        f"openai:planner@{server.openai_url}",
        "--team",
        "hello",
        **{guard.ENV_ALLOW: server.base},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "planned 1 task in 3 calls," in proc.stdout
    plan = load_plan(cwd / "plan.yaml")
    assert (plan.team, [t.id for t in plan.tasks]) == ("hello", ["greet"])
    assert plan.planning_spend is not None and plan.planning_spend.calls == 3
    assert (
        "'x.txt', which is not in the artifact list"
        in server.requests[2]["messages"][-1]["content"]
    )


def test_plan_and_run_json_print_one_document_and_the_planning_on_stderr(
    cwd: Path, wire: ServerFactory
) -> None:
    good = {"tasks": [{"id": "greet", "goal": "Say hello.", "input": {"notes": "notes.txt"}}]}
    server = wire([answer(good), answer(good)])
    model = ["--model", f"openai:planner@{server.openai_url}", "--team", "hello"]
    planning = ["--goal", "Say hello.", "--artifact", "notes.txt", *model, "--json"]
    env = {guard.ENV_ALLOW: server.base}
    planned = tenure(cwd, "plan", *planning, **env)
    assert planned.returncode == 0, planned.stderr
    shown = json.loads(planned.stdout)  # the one line there
    assert (shown["command"], shown["team"], shown["tasks"]) == ("plan", "hello", ["greet"])
    assert shown["file"] == "plan.yaml" and shown["spend"]["calls"] == 1
    assert "planned 1 task in 1 call" in planned.stderr
    ran = tenure(cwd, "run", *planning, "--mode", "local", "--exec", "noop", **env)
    assert ran.returncode == 0, ran.stderr
    shown = json.loads(ran.stdout)
    assert (shown["command"], shown["outcome"]) == ("run", "done")
    assert "planned 1 task in 1 call" in ran.stderr and "the plan is in" in ran.stderr


def test_tenure_plan_refuses_a_missing_artifact(
    cwd: Path,
    wire: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = wire([answer({"tasks": []})])
    line = one_error_line(
        tenure_here(
            cwd,
            monkeypatch,
            capsys,
            "plan",
            "--goal",
            "g",
            "--artifact",
            "missing.txt",
            "--model",
            f"openai:planner@{server.openai_url}",
        )
    )
    assert "artifact 'missing.txt' does not exist" in line
    assert server.requests == []
