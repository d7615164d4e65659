"""Output for scripts and people: ``--json`` on every command that reports (one
versioned document, the keys docs/operations.md lists), ``tenure log`` newest first
with readable values, ``tenure runs``, reasons cut at a word boundary, the status
header's one epoch. A real SQLite store, a team run by ``LocalTeam`` with a real
command for its agent, the CLI through Typer's runner."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tenure.console.cli import app
from tenure.executors import CommandExecutor
from tenure.protocol import Plan
from tenure.protocol.clip import ELLIPSIS, clip
from tenure.roles import LocalTeam
from tenure.store import open_store

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
TEAM = "out"
QUESTION = (
    "which of the several currencies that the vendors quote in should the report use "
    "for every price it shows"
)
AGENT = f"""\
import json, sys
env = json.load(sys.stdin)
if env["task_id"] == "ask":
    print(json.dumps({{"status": "blocked", "question": {QUESTION!r}}}))
else:
    print(json.dumps({{"nested": {{"a": [1, 2]}}, "none": None}}))
"""


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("out")
    (root / "agent.py").write_text(AGENT)
    plan = Plan.model_validate(
        {"team": TEAM, "tasks": [{"id": "fetch", "goal": "fetch"}, {"id": "ask", "goal": "ask"}]}
    )
    address = f"sqlite:///{root / 'state.db'}"
    with open_store(address) as store:
        executor = CommandExecutor([sys.executable, str(root / "agent.py")])
        LocalTeam(store, plan, executor, workers=1, state_dir=root / "st").run(timeout=60)
        store.append_event(TEAM, "note.added", {"said": "\x1b[31mred", "flag": True, "n": None})
    return address


def documented_keys() -> dict[str, list[str]]:
    section = DOC.read_text().split("## JSON output", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z -]+)` \| (.+) \|$", section, flags=re.MULTILINE)
    return {name: re.findall(r"`([a-z_]+)`", keys.split(", and")[0]) for name, keys in rows}


def document(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.stdout)
    return shown


def test_every_reporting_command_prints_one_versioned_document_with_its_documented_keys(
    url: str, tmp_path: Path
) -> None:
    message = Path(__file__).resolve().parents[2] / "examples" / "messages" / "task-assign.json"
    assert invoke("keys", "init", "--team", TEAM, "--keys", str(tmp_path / "k")).exit_code == 0
    calls = {
        "status": ["status", "--store", url],
        "runs": ["runs", "--store", url],
        "log": ["log", "--store", url],
        "inbox": ["inbox", "--store", url],
        "decisions": ["decisions", "--store", url],
        "dead-letters": ["dead-letters", "--team", TEAM, "--store", url],
        "trim": ["trim", "--team", TEAM, "--older-than", "1h", "--store", url],
        "validate": ["validate", str(message)],
        "agents": ["agents", "script:true", "--timeout", "5"],
        "keys show": ["keys", "show", "--team", TEAM, "--keys", str(tmp_path / "k")],
        "keys init": ["keys", "init", "--team", "other", "--keys", str(tmp_path / "k")],
        "keys add": ["keys", "add", "--team", TEAM, "-m", "w1", "--keys", str(tmp_path / "k")],
        "keys rotate": ["keys", "rotate", "--team", TEAM, "--keys", str(tmp_path / "k")],
        "watch": ["watch", "--store", url],
    }
    keys = documented_keys()
    assert set(calls) <= set(keys)
    for name, args in calls.items():
        shown = document(*args)
        assert (shown["version"], shown["command"]) == (1, name)
        assert list(shown) == keys[name], name


def test_a_json_error_is_one_line_on_stderr_and_nothing_on_stdout(tmp_path: Path) -> None:
    result = invoke("status", "--store", f"sqlite:///{tmp_path / 'none.db'}", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: no store at")


def test_status_json_holds_the_register(url: str) -> None:
    (team,) = document("status", "--store", url)["teams"]
    assert team["team"] == TEAM and team["counts"] == {"blocked": 1, "done": 1}
    tasks = {t["task_id"]: t for t in team["tasks"]}
    assert tasks["ask"]["state"] == "blocked" and QUESTION in tasks["ask"]["reason"]
    assert set(tasks["fetch"]) >= {"attempt", "assignee", "updated_at", "spend", "reason"}
    assert tasks["fetch"]["result"] == {"nested": {"a": [1, 2]}, "none": None}  # accepted
    assert tasks["ask"]["result"] is None and tasks["fetch"]["result_note"] is None


def test_status_and_run_json_give_each_result_redacted_and_cut_when_huge(tmp_path: Path) -> None:
    from tenure.console.team_data import RESULT_BYTES
    from tenure.executors import PythonExecutor
    from tenure.protocol.secrets import register_secret

    secret = "sk-result-5f0e1a9c7b"
    register_secret(secret)
    artifacts = {"small": {"key": f"use {secret}"}, "huge": "x" * (RESULT_BYTES + 1)}
    plan = Plan.model_validate(
        {"team": "res", "tasks": [{"id": name, "goal": name} for name in artifacts]}
    )
    address = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(address) as store:
        executor = PythonExecutor(lambda env, ctx: artifacts[env.task_id])
        LocalTeam(store, plan, executor, workers=1, state_dir=tmp_path).run(timeout=60)
    (team,) = document("status", "--store", address)["teams"]
    tasks = {t["task_id"]: t for t in team["tasks"]}
    assert tasks["small"]["result"] == {"key": "use ***"}
    assert tasks["huge"]["result"] is None
    assert tasks["huge"]["result_note"].startswith(f"left out: {RESULT_BYTES + 3:,} bytes")


def test_the_status_header_says_the_epoch_once(url: str) -> None:
    result = invoke("status", "--store", url)
    (header,) = [line for line in result.stdout.splitlines() if line.startswith("team out")]
    assert header.count("epoch") == 1, header


def test_a_long_reason_is_cut_at_a_word_boundary_with_an_ellipsis(url: str) -> None:
    result = invoke("status", "--store", url)
    text = " ".join(result.stdout.split())  # the reason column folds over lines
    assert ELLIPSIS in text
    shown = text.split(ELLIPSIS)[0].split("│")[-1].strip()
    assert shown.split()[-1] in QUESTION.split()  # the last word shown is whole


def test_clip_never_cuts_inside_a_word() -> None:
    assert clip("short", 10) == "short"
    assert clip("the check failed because", 14) == "the check" + ELLIPSIS
    assert clip("one, two three", 9) == "one, two" + ELLIPSIS
    assert clip("one, two three", 8) == "one" + ELLIPSIS  # trailing punctuation dropped
    assert clip("x" * 30, 10) == "x" * 9 + ELLIPSIS  # no boundary: cut, still said
    for width in range(6, 40):  # QUESTION's first word fits in 5
        cut = clip(QUESTION, width)
        assert len(cut) <= width and cut.endswith(ELLIPSIS)
        assert cut[:-1].split()[-1] in QUESTION.split()


def test_every_shortened_text_is_cut_at_a_word_boundary() -> None:
    """The run report's cells, the watch screen's cells and its printed snapshot, and
    the verdicts and answers ``tenure decisions`` shows as the log keeps them."""
    from tenure.console.report_text import short
    from tenure.verify import Verdict, verdict_event
    from tenure.verify.decisions import preview

    long = " ".join([QUESTION] * 8)
    logged = verdict_event(Verdict("command", False, long), task_id="t", key="t:attempt-1")
    for cut in (logged["reason"], preview(long, 100)):
        assert cut.endswith(ELLIPSIS) and cut[:-1].split()[-1] in QUESTION.split(), cut
    from tenure.console.watch_app import first_line
    from tenure.console.watch_cmds import print_snapshot
    from tenure.console.watch_data import Snapshot, TaskRow

    assert short(QUESTION, 30) == clip(QUESTION, 30) and short("t-0123456789", 6) == "t-012…"
    for width in (20, 37, 60):
        cut = first_line(QUESTION, width)
        assert cut.endswith(ELLIPSIS) and cut[:-1].split()[-1] in QUESTION.split()
    assert first_line("whole\nand more", 40) == f"whole {ELLIPSIS}"  # more lines: said
    from tenure.console.app import out

    task = TaskRow("t", "ask", "blocked", 1, 3, 5.0, None, QUESTION)
    with out.capture() as captured:
        print_snapshot(Snapshot(root=None, at=0.0, tasks=[task]))
    text = " ".join(captured.get().split())
    shown = text.split(ELLIPSIS)[0].split("│")[-1].strip()
    assert shown and shown.split()[-1] in QUESTION.split()


def test_what_an_agent_cli_prints_is_shown_not_obeyed(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.write_text("#!/bin/sh\nprintf '\\033[2J\\033]0;owned\\007v1 [bold]x[/]\\n'\n")
    agent.chmod(0o755)
    result = invoke("agents", f"script:{agent}", "--timeout", "5")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b[2J" in result.stdout and "[bold]x[/]" in result.stdout


def test_a_planner_warning_is_shown_not_obeyed(capsys: pytest.CaptureFixture[str]) -> None:
    from tenure.console.model_cmds import warn

    warn("the model added \x1b[31mcommand:rm\x1b[0m")
    said = capsys.readouterr().err
    assert "\x1b" not in said and "\\x1b[31mcommand:rm" in said


def test_log_is_newest_first_and_says_how_many_older_events_there_are(url: str) -> None:
    result = invoke("log", "--store", url, "--team", TEAM, "--limit", "3")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    seqs = [int(line.split()[0]) for line in lines[:3]]
    assert seqs == sorted(seqs, reverse=True)
    total = len(document("log", "--store", url, "--all")["events"])
    assert lines[3] == f"{total - 3} older events (use --all / --limit)"
    shown = document("log", "--store", url, "-n", "2")
    assert [e["seq"] for e in shown["events"]] == seqs[:2] and shown["older"] == total - 2
    assert "older events" not in invoke("log", "--store", url, "--all").stdout


def test_log_shows_values_readably_and_member_text_made_safe(url: str) -> None:
    out = invoke("log", "--store", url, "--all").stdout
    (note,) = [line for line in out.splitlines() if "note.added" in line]
    assert "said=\\x1b[31mred" in note and "\x1b" not in note
    assert "flag=true" in note and "n=null" in note
    (finished,) = [
        line
        for line in out.splitlines()
        if "task.transition" in line and "task_id=fetch" in line and "to=review" in line
    ]
    assert '"nested":{"a":[1,2]}' in finished and "'nested'" not in finished
    assert "None" not in out and "True" not in out


def test_runs_lists_each_team_with_outcome_counts_and_times(url: str) -> None:
    (run,) = document("runs", "--store", url)["runs"]
    assert run["team"] == TEAM and run["outcome"] == "waiting"
    assert run["counts"] == {"blocked": 1, "done": 1}
    assert run["ended_at"] >= run["started_at"] and run["duration_seconds"] >= 0
    assert run["spend"]["calls"] == 0
    table = invoke("runs", "--store", url)
    assert table.exit_code == 0 and "waiting" in table.stdout and "1 done" in table.stdout


def test_runs_splits_a_team_at_each_fresh_start(tmp_path: Path) -> None:
    """Three runs of one team, each ``--fresh``: each its own row with its own outcome,
    times, counts and spend, however the register was cleared in between."""
    import tenure
    from tenure.roles.teams.fresh import start_over

    answer = {"status": "completed", "artifact": {"text": "done"}}
    asked = {"status": "blocked", "question": "which one?"}
    plan = Plan.model_validate({"team": "f", "tasks": [{"id": "a", "goal": "say a"}]})
    address = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(address) as store:
        for n, reply in enumerate((answer, asked, answer)):
            if n:
                start_over(store, plan)
            model = tenure.ScriptedModel([reply])
            team = LocalTeam(store, plan, tenure.LLMExecutor(model), workers=1, state_dir=tmp_path)
            assert team.run(timeout=60) == "settled"
    found = document("runs", "--store", address)["runs"]
    assert [(r["run"], r["revision"], r["outcome"]) for r in found] == [
        (3, 3, "done"),
        (2, 2, "waiting"),
        (1, 1, "done"),
    ]
    assert [r["counts"] for r in found] == [{"done": 1}, {"blocked": 1}, {"done": 1}]
    for later, earlier in zip(found, found[1:], strict=False):
        assert earlier["ended_at"] <= later["started_at"]  # one after the other
        assert later["spend"]["calls"] == earlier["spend"]["calls"] == 1  # each its own
    assert all(r["duration_seconds"] < 30 and r["spend"]["tokens"] > 0 for r in found)
    table = invoke("runs", "--store", address).stdout
    rows = [line.split() for line in table.splitlines() if line.startswith("│ f ")]
    assert [(row[3], row[5]) for row in rows] == [("#3", "done"), ("#2", "waiting"), ("#1", "done")]


def test_inbox_json_lists_what_waits(url: str) -> None:
    (item,) = document("inbox", "--store", url)["items"]
    assert (item["team"], item["task_id"], item["state"]) == (TEAM, "ask", "blocked")
    assert QUESTION in item["why"]


def test_run_json_prints_the_outcome_alone_on_stdout(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("team: js\ntasks:\n  - id: a\n    goal: a\n  - id: b\n    goal: b\n")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    args = ["run", str(plan), "--mode", "local", "--store", url, "--state-dir", str(tmp_path)]
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert list(shown) == documented_keys()["run"]
    assert (shown["command"], shown["outcome"], shown["exit"]) == ("run", "done", 0)
    assert shown["teams"][0]["counts"] == {"done": 2}
    assert [t["result"] for t in shown["teams"][0]["tasks"]] == [{"ok": True}, {"ok": True}]
    again = json.loads(invoke(*args, "--json").stdout)  # done already: said, still JSON
    assert (again["outcome"], again["exit"]) == ("done", 0)
