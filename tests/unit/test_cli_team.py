"""The ``tenure`` command as people use it: real subprocesses, a real SQLite file in the
working directory, and an agent that is a real command reading envelopes on stdin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer

from tenure.store import open_store

TEAM = "demo"
QUESTION = "which currency should prices be in?"

OK_PLAN = """\
team: demo
tasks:
  - id: fetch
    goal: fetch the vendor list
  - id: price
    goal: price the items
  - id: report
    goal: write the report
"""

BLOCKED_PLAN = """\
team: demo
tasks:
  - id: fetch
    goal: fetch the vendor list
  - id: ask
    goal: price in the right currency
"""

AGENT = f"""\
import json, sys
env = json.load(sys.stdin)
if env["task_id"] == "ask" and not env["input"].get("operator_answers"):
    print(json.dumps({{"status": "blocked", "question": {QUESTION!r}}}))
else:
    answers = env["input"].get("operator_answers", [])
    print(json.dumps({{"task": env["task_id"], "answers": answers}}))
"""


def tenure(cwd: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "PYTHONIOENCODING": "utf-8",
    }
    env.pop("TENURE_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def project(path: Path, plan: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "plan.yaml").write_text(plan)
    (path / "agent.py").write_text(AGENT)
    return path


def agent_exec(path: Path) -> str:
    return f"command:{sys.executable} {path / 'agent.py'}"


def states(path: Path) -> dict[str, str]:
    with open_store(f"sqlite:///{path / '.tenure' / 'state.db'}") as store:
        return {t.task_id: t.state for t in store.tasks(TEAM)}


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:")
    return lines[0]


@pytest.fixture(scope="module")
def blocked_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished local run with one task done and one waiting in the inbox."""
    path = project(tmp_path_factory.mktemp("blocked"), BLOCKED_PLAN)
    result = tenure(
        path, "run", "plan.yaml", "--workers", "2", "--mode", "local", "--exec", agent_exec(path)
    )
    assert result.returncode == 3, result.stdout + result.stderr
    return path


@pytest.fixture
def copy_of_blocked_run(blocked_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(blocked_run, target)
    return target


# --- tenure run -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["team", "local", "queue"])
def test_run_exits_0_when_every_task_is_done(tmp_path: Path, mode: str) -> None:
    path = project(tmp_path, OK_PLAN)
    result = tenure(
        path, "run", "plan.yaml", "--workers", "2", "--mode", mode, "--exec", agent_exec(path)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 done" in result.stdout
    assert states(path) == {"fetch": "done", "price": "done", "report": "done"}


@pytest.mark.parametrize("mode", ["team", "local", "queue"])
def test_run_exits_3_when_a_task_is_blocked(tmp_path: Path, mode: str) -> None:
    path = project(tmp_path, BLOCKED_PLAN)
    result = tenure(
        path, "run", "plan.yaml", "--workers", "2", "--mode", mode, "--exec", agent_exec(path)
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "tenure inbox" in result.stdout
    assert states(path) == {"fetch": "done", "ask": "blocked"}


def test_run_in_local_mode_works_on_a_memory_store(tmp_path: Path) -> None:
    path = project(tmp_path, OK_PLAN)
    result = tenure(path, "run", "plan.yaml", "--mode", "local", "--store", "memory://")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 done" in result.stdout
    assert not (path / ".tenure" / "state.db").exists()


@pytest.mark.parametrize("mode", ["team", "queue"])
def test_run_with_worker_processes_refuses_a_memory_store(tmp_path: Path, mode: str) -> None:
    path = project(tmp_path, OK_PLAN)
    line = one_error_line(tenure(path, "run", "plan.yaml", "--mode", mode, "--store", "memory://"))
    assert "--mode local" in line


def test_run_with_a_plan_that_does_not_parse_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text('team: demo\ntasks:\n  - id: a\n    goal: "x" y\n')
    line = one_error_line(tenure(tmp_path, "run", "plan.yaml"))
    assert "plan.yaml" in line
    assert "line 4" in line
    assert not (tmp_path / ".tenure" / "state.db").exists(), "a refused plan touched the store"


def test_run_with_an_invalid_field_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("tasks:\n  - {id: a, goal: A, deadline_seconds: -1}\n")
    assert "tasks[0].deadline_seconds" in one_error_line(tenure(tmp_path, "run", "plan.yaml"))


def test_run_with_a_bad_executor_spec_names_the_option(tmp_path: Path) -> None:
    project(tmp_path, OK_PLAN)
    line = one_error_line(tenure(tmp_path, "run", "plan.yaml", "--exec", "teleport"))
    assert "--exec" in line


def test_run_with_a_missing_plan_file_is_one_line(tmp_path: Path) -> None:
    result = tenure(tmp_path, "run", "nope.yaml")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout


# --- looking at a run -------------------------------------------------------------------


def test_status_shows_the_register(blocked_run: Path) -> None:
    result = tenure(blocked_run, "status")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "team demo" in out
    assert "epoch 1" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "blocked" in rows["ask"]
    assert "question:" in rows["ask"]
    assert "done" in rows["fetch"]


def test_status_of_an_empty_store_says_so(tmp_path: Path) -> None:
    open_store(f"sqlite:///{tmp_path / 'empty.db'}").close()
    result = tenure(tmp_path, "status", "--store", "sqlite:///empty.db")
    assert result.returncode == 0, result.stderr
    assert "no teams" in result.stdout


def test_status_without_a_store_is_an_error_and_creates_none(tmp_path: Path) -> None:
    result = tenure(tmp_path, "status")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: no store at .tenure/state.db (start a team with tenure run or tenure leader)"
    )
    assert list(tmp_path.iterdir()) == []


def test_log_shows_the_events_newest_first(blocked_run: Path) -> None:
    result = tenure(blocked_run, "log", "--team", TEAM, "--limit", "1000")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for kind in ("lease.claimed", "task.created", "task.dispatched", "verify.verdict"):
        assert kind in out
    assert out.index("lease.claimed") > out.index("task.dispatched") > out.index("inbox.added")
    assert "older events" not in out
    (added,) = [line for line in out.splitlines() if "inbox.added" in line]
    assert "task_id=ask" in added


def test_log_json_is_one_document_newest_first(blocked_run: Path) -> None:
    result = tenure(blocked_run, "log", "--json", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["version"], shown["command"], shown["older"]) == (1, "log", 0)
    events = shown["events"]
    assert [e["seq"] for e in events] == sorted((e["seq"] for e in events), reverse=True)
    added = [e for e in events if e["kind"] == "inbox.added"]
    assert [e["data"]["task_id"] for e in added] == ["ask"]


def test_inbox_lists_the_blocked_task_with_its_question(blocked_run: Path) -> None:
    result = tenure(blocked_run, "inbox")
    assert result.returncode == 0, result.stderr
    assert "ask" in result.stdout
    assert QUESTION in result.stdout
    assert "fetch" not in result.stdout


def test_inbox_of_a_finished_team_is_empty(tmp_path: Path) -> None:
    path = project(tmp_path, OK_PLAN)
    tenure(path, "run", "plan.yaml", "--mode", "local", "--exec", agent_exec(path))
    result = tenure(path, "inbox")
    assert result.returncode == 0, result.stderr
    assert "inbox is empty" in result.stdout


# --- acting on the inbox ----------------------------------------------------------------


def test_answer_appends_to_the_qa_and_requeues_the_task(copy_of_blocked_run: Path) -> None:
    path = copy_of_blocked_run
    result = tenure(path, "answer", "ask", "EUR, always", "--team", TEAM)
    assert result.returncode == 0, result.stderr
    assert "re-queued" in result.stdout
    with open_store(f"sqlite:///{path / '.tenure' / 'state.db'}") as store:
        record = store.get_task(TEAM, "ask")
        assert record.state == "queued"
        assert record.assignee is None
        assert record.data["qa"] == [{"question": QUESTION, "answer": "EUR, always"}]
        assert "question" not in record.data
        kinds = [e.kind for e in store.events(TEAM, limit=10_000)]
        assert "inbox.answered" in kinds
    assert "ask" not in tenure(path, "inbox").stdout

    rerun = tenure(
        path, "run", "plan.yaml", "--mode", "local", "--exec", agent_exec(path), "--workers", "1"
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    with open_store(f"sqlite:///{path / '.tenure' / 'state.db'}") as store:
        record = store.get_task(TEAM, "ask")
        assert record.state == "done"
        assert record.result is not None
        assert record.result["artifact"]["answers"] == [
            {"question": QUESTION, "answer": "EUR, always"}
        ]


def test_answer_an_unknown_task_is_one_readable_line(copy_of_blocked_run: Path) -> None:
    line = one_error_line(tenure(copy_of_blocked_run, "answer", "ghost", "hello", "--team", TEAM))
    assert "'ghost'" in line
    assert "ask" in line  # the tasks it does have


def test_answer_a_task_that_is_not_waiting_is_refused(copy_of_blocked_run: Path) -> None:
    line = one_error_line(tenure(copy_of_blocked_run, "answer", "fetch", "hi", "--team", TEAM))
    assert "done" in line


def test_cancel_cancels_the_task(copy_of_blocked_run: Path) -> None:
    path = copy_of_blocked_run
    result = tenure(path, "cancel", "ask", "--team", TEAM, "--reason", "vendor dropped")
    assert result.returncode == 0, result.stderr
    assert "cancelled" in result.stdout
    with open_store(f"sqlite:///{path / '.tenure' / 'state.db'}") as store:
        record = store.get_task(TEAM, "ask")
        assert (record.state, record.reason) == ("cancelled", "vendor dropped")
    again = one_error_line(tenure(path, "cancel", "ask", "--team", TEAM))
    assert "already cancelled" in again
    assert "'nope'" in one_error_line(tenure(path, "cancel", "nope", "--team", TEAM))


# --- help -------------------------------------------------------------------------------


def test_every_command_help_has_an_example() -> None:
    """In-process (the same click command renders the same help), so it stays fast."""
    from typer.testing import CliRunner

    from tenure.console.cli import app

    names = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"run", "leader", "worker", "status", "log", "inbox", "answer", "cancel"} <= set(names)
    runner = CliRunner()
    missing = []
    for name in names:
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, f"{name}: {result.output}"
        if "Example" not in result.output:
            missing.append(name)
    assert missing == [], f"--help without an Example: {missing}"


def test_help_in_a_real_process_shows_the_example(tmp_path: Path) -> None:
    result = tenure(tmp_path, "answer", "--help")
    assert result.returncode == 0, result.stderr
    assert "Example" in result.stdout
    assert "tenure answer" in result.stdout


def test_the_top_level_help_lists_the_commands(tmp_path: Path) -> None:
    result = tenure(tmp_path, "--help")
    assert result.returncode == 0
    for name in ("run", "status", "inbox", "answer", "cancel"):
        assert name in result.stdout


def test_agent_script_is_valid_python() -> None:
    compile(textwrap.dedent(AGENT), "agent.py", "exec")
