"""``tenure schema`` and ``tenure validate``, run as a person runs them: a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tenure.protocol import MESSAGE_TYPES, new_id

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "messages"


def tenure(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
        check=False,
    )


def one_readable_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def assign(**body: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "id": new_id(),
        "type": "task.assign",
        "team": "demo",
        "from": "leader-1",
        "to": "worker-1",
        "epoch": 3,
        "ts": "2025-01-02T03:04:05Z",
        "body": {
            "task_id": "greet",
            "idempotency_key": "greet:attempt-1",
            "epoch": 3,
            "attempt": 1,
            "assigned_to": "worker-1",
            "deadline_seconds": 60,
            "goal": "Say hello",
            **body,
        },
    }


# --- tenure schema ----------------------------------------------------------------------


def test_schema_without_a_type_prints_every_schema_keyed_by_type() -> None:
    done = tenure("schema")
    assert done.returncode == 0, done.stderr
    schemas = json.loads(done.stdout)
    assert isinstance(schemas, dict)
    assert set(MESSAGE_TYPES) <= set(schemas)
    assert {"envelope", "result", "plan"} <= set(schemas)
    for name, schema in schemas.items():
        assert schema["type"] == "object", name


def test_schema_of_one_type_prints_that_schema() -> None:
    done = tenure("schema", "task.assign")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["properties"]["type"]["const"] == "task.assign"
    assert {"v", "id", "team", "from", "to", "epoch", "ts", "body"} <= set(schema["properties"])
    assert "epoch" in schema["required"]
    assert schema["additionalProperties"] is False


def test_schema_of_a_membership_type_does_not_require_epoch() -> None:
    done = tenure("schema", "member.join")
    assert done.returncode == 0, done.stderr
    assert "epoch" not in json.loads(done.stdout).get("required", [])


def test_schema_of_an_unknown_type_is_one_line_and_exit_2() -> None:
    done = tenure("schema", "nope")
    assert done.returncode == 2
    assert done.stdout == ""
    line = one_readable_line(done.stderr)
    assert "'nope'" in line
    assert "task.assign" in line


# --- tenure validate ------------------------------------------------------------------


def test_validate_a_good_file_exits_0(tmp_path: Path) -> None:
    path = write(tmp_path / "good.json", assign())
    done = tenure("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout
    assert "task.assign" in done.stdout
    assert done.stderr == ""


def test_validate_a_bad_file_exits_1_and_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", assign(attempt=2))  # key says attempt-1
    done = tenure("validate", str(path))
    assert done.returncode == 1
    line = one_readable_line(done.stderr)
    assert "body.idempotency_key" in line
    assert str(path) in line


def test_validate_a_missing_epoch_names_epoch(tmp_path: Path) -> None:
    data = assign()
    del data["epoch"]
    done = tenure("validate", str(write(tmp_path / "bad.json", data)))
    assert done.returncode == 1
    assert ": epoch: " in one_readable_line(done.stderr)


def test_validate_malformed_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "v": 1,\n  "type": "task.assign"\n  "team": "demo"\n}\n')
    done = tenure("validate", str(path))
    assert done.returncode == 1
    assert "line 4" in one_readable_line(done.stderr)


def test_validate_a_missing_file_exits_2_without_a_traceback(tmp_path: Path) -> None:
    done = tenure("validate", str(tmp_path / "absent.json"))
    assert done.returncode == 2
    assert "cannot read" in one_readable_line(done.stderr)


def test_validate_error_text_that_looks_like_markup_is_printed_as_is(tmp_path: Path) -> None:
    data = assign()
    data["team"] = "[/]"
    done = tenure("validate", str(write(tmp_path / "bad.json", data)))
    assert done.returncode == 1
    assert "'[/]'" in one_readable_line(done.stderr)


# --- the shipped examples -------------------------------------------------------------


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.json"))


def test_there_are_examples_of_the_main_types() -> None:
    kinds = {json.loads(path.read_text())["type"] for path in example_files()}
    assert {"task.assign", "task.result", "leadership.claim"} <= kinds


@pytest.mark.parametrize("path", example_files(), ids=lambda path: path.name)
def test_every_example_message_validates(path: Path) -> None:
    done = tenure("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text())["type"] in done.stdout


# --- tenure validate on a plan ----------------------------------------------------------

PLAN_YAML = "team: shop\ntasks:\n  - {id: fetch, goal: Fetch.}\n  - {id: sum, goal: Add., depends_on: [fetch]}\n"


def validate(*args: str) -> Any:
    """``tenure validate`` in this process (Typer's runner): what it prints and exits."""
    from typer.testing import CliRunner

    from tenure.console.cli import app

    return CliRunner().invoke(app, ["validate", *args], env={"COLUMNS": "200", "NO_COLOR": "1"})


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("plan.yaml", PLAN_YAML),
        ("plan.md", f"# The shop\n\nWhat we do.\n\n```yaml\n{PLAN_YAML}```\n"),
        ("plan.json", json.dumps({"team": "shop", "tasks": [{"id": "fetch", "goal": "Fetch."}]})),
        ("plan", PLAN_YAML),  # no suffix: a plan by its content
    ],
)
def test_validate_takes_a_plan_as_yaml_json_or_markdown(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    done = validate(str(tmp_path / name))
    assert done.exit_code == 0, done.output
    assert "valid plan for team 'shop'" in done.stdout
    shown = json.loads(validate(str(tmp_path / name), "--json").stdout)
    assert (shown["type"], shown["team"], shown["valid"]) == ("plan", "shop", True)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("team: t\ntasks:\n  - {id: a, goal: g, colour: red}\n", "tasks[0].colour: no such field"),
        (
            "team: t\ntasks:\n  - {id: a, goal: g, options: {colour: red}}\n",
            "tasks[0].options.colour: no leader feature reads this option",
        ),
        (
            "team: t\ntasks:\n  - id: a\n    goal: g\n    team:\n      tasks:\n"
            "        - {id: b, goal: g, options: {quorom: 3}}\n",
            "tasks[0].team.tasks[0].options.quorom: no leader feature reads this option",
        ),
        ("team: t\ntasks:\n  - {id: a, goal: g, max_attempts: 99}\n", "tasks[0].max_attempts"),
        ("team: t\ntasks:\n  - {id: a, goal: " + "x" * 70_000 + "}\n", "tasks[0].goal: 70,000 bytes"),
        ("team: t\ntasks:\n  - {id: a, goal: g, depends_on: [b]}\n", "tasks[0].depends_on"),
        ("team: t\ntasks:\n  - {id: a, goal: g, scope: [/etc]}\n", "tasks[0].scope[0]"),
        ("team: t\ntasks: [\n", "plan.yaml"),
    ],
)
def test_validate_refuses_a_plan_as_a_run_would_in_one_line(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text, encoding="utf-8")
    done = validate(str(path))
    assert done.exit_code == 1, done.output
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), done.stderr
    assert said in lines[0]
    assert "valid JSON" not in lines[0]


def test_the_validate_help_examples_name_files_that_validate() -> None:
    import re

    shown = tenure("validate", "--help").stdout
    files = re.findall(r"Example: tenure validate (\S+)", shown)
    assert len(files) >= 2 and any(f.endswith(".yaml") for f in files), shown
    for name in files:
        assert (ROOT / name).is_file(), name
        done = tenure("validate", name, cwd=ROOT)
        assert done.returncode == 0, done.stderr
