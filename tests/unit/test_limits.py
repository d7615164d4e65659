"""The limits of ``tenure.protocol.limits`` at each door: plan files and texts, YAML,
JSON, command output. Each refusal names the field (or line) and the limit."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from tenure.executors import CommandExecutor, TaskContext
from tenure.protocol import ProtocolError, TaskResult, load_plan, parse_envelope, parse_plan
from tenure.protocol.limits import (
    MAX_FIELD_BYTES,
    MAX_JSON_DEPTH,
    MAX_MESSAGE_BYTES,
    MAX_PLAN_BYTES,
    MAX_TASK_BYTES,
    MAX_TASKS,
    MAX_YAML_ALIASES,
    check_depth,
    decode_json,
)

ENVELOPE = {
    "task_id": "t",
    "idempotency_key": "t:attempt-1",
    "epoch": 1,
    "attempt": 1,
    "assigned_to": "w1",
    "deadline_seconds": 30,
    "goal": "go",
}


def refused(text: str, **kwargs: object) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_plan(text, source="plan.yaml", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    return caught.value


# --- plans ----------------------------------------------------------------------------


def test_a_plan_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    with path.open("wb") as handle:  # 50 MB, sparse: nothing to parse would fit in memory
        handle.truncate(50 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError) as caught:
            load_plan(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value) == (
        f"{path}: (file): 52,428,800 bytes; the limit is {MAX_PLAN_BYTES:,}"
    )
    assert peak < 3 * MAX_PLAN_BYTES


def test_a_plan_text_over_the_limit_is_refused_before_it_is_parsed() -> None:
    error = refused("tasks: []\n" + "#" * MAX_PLAN_BYTES)
    assert error.field == "(plan)" and f"the limit is {MAX_PLAN_BYTES:,}" in error.expected


def test_a_long_string_anywhere_in_a_plan_is_refused_naming_its_path() -> None:
    long = "x" * (MAX_FIELD_BYTES + 1)
    cases = {
        f"tasks:\n  - id: a\n    goal: {long}\n": "tasks[0].goal",
        f"goal: {long}\ntasks: [{{id: a, goal: g}}]\n": "goal",
        f"tasks:\n  - id: a\n    goal: g\n  - id: b\n    goal: g\n    input: {{doc: {long}}}\n": (
            "tasks[1].input.doc"
        ),
        f"tasks:\n  - id: a\n    goal: g\n    acceptance_criteria: [ok, {long}]\n": (
            "tasks[0].acceptance_criteria[1]"
        ),
    }
    for text, field in cases.items():
        error = refused(text)
        assert error.field == field, str(error)
        assert error.expected == f"{MAX_FIELD_BYTES + 1:,} bytes; the limit is {MAX_FIELD_BYTES:,}"


def test_a_goal_over_the_limit_is_refused_however_the_plan_is_built() -> None:
    from tenure.protocol import Plan

    with pytest.raises(ValueError) as caught:
        Plan.model_validate({"tasks": [{"id": "a", "goal": "g" * (MAX_FIELD_BYTES + 1)}]})
    assert "the limit is 65,536" in str(caught.value)
    with pytest.raises(ProtocolError) as envelope:
        parse_envelope({**ENVELOPE, "goal": "g" * (MAX_FIELD_BYTES + 1)})
    assert envelope.value.field == "goal"


def test_a_task_too_large_for_its_envelope_is_refused_naming_it() -> None:
    criteria = ", ".join(["x" * 60_000] * 3)  # each string within its limit, the task not
    text = f"tasks:\n  - {{id: a, goal: g}}\n  - {{id: b, goal: g, acceptance_criteria: [{criteria}]}}\n"
    error = refused(text)
    assert error.field == "tasks[1]" and f"the limit is {MAX_TASK_BYTES:,}" in error.expected
    nested = f"tasks:\n  - {{id: c, goal: g, team: {{tasks: [{{id: d, goal: g, input: {{a: [{criteria}]}}}}]}}}}\n"
    assert refused(nested).field == "tasks[0].team.tasks[0]"


def test_more_tasks_than_the_limit_are_refused_nested_ones_counted() -> None:
    tasks = ",".join(f"{{id: t{n}, goal: g}}" for n in range(MAX_TASKS + 1))
    error = refused(f"tasks: [{tasks}]")
    assert str(error) == f"plan.yaml: tasks: {MAX_TASKS + 1:,} tasks; the limit is {MAX_TASKS:,}"
    half = ",".join(f"{{id: n{n}, goal: g}}" for n in range(MAX_TASKS // 2 + 1))
    nested = f"tasks: [{half}, {{id: c, goal: g, team: {{tasks: [{half}]}}}}]"
    assert "the limit is 5,000" in str(refused(nested))


def test_a_plan_nested_too_deep_is_refused_as_json_and_as_yaml() -> None:
    json_text = (
        '{"tasks": [{"id": "a", "goal": "g", "input": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}]}"
    )
    assert "nested at most 64 deep" in str(refused(json_text))
    yaml_text = "tasks: [{id: a, goal: g, input: " + "[" * 100 + "]" * 100 + "}]"
    assert "nested at most 64 deep" in str(refused(yaml_text))
    flow = "tasks: " + "[" * 200_000  # libyaml's own composer would crash the process
    assert refused(flow).field.startswith("line ")
    assert refused(flow).expected == "lists and mappings nested at most 64 deep"


@pytest.mark.parametrize("depth", [1_500, 100_000])
def test_a_nest_past_libyamls_own_limit_is_told_ours(depth: int) -> None:
    """libyaml stops near 1,000 levels, before the screen counts to 64: the line names
    the limit all the same, for a YAML, a JSON and a Markdown plan."""
    nest = "[" * depth + "]" * depth
    texts = {
        "yaml": f"tasks:\n  - id: a\n    goal: g\n    input: {{a: {nest}}}\n",
        "json": '{"tasks": [{"id": "a", "goal": "g", "input": {"a": ' + nest + "}}]}",
    }
    for text in texts.values():  # JSON a Python reads this deep is told by the plan's check
        error = refused(text)
        assert error.expected.endswith("nested at most 64 deep"), str(error)
    markdown = refused("# p\n\n```yaml\n" + texts["yaml"] + "```\n", markdown=True)
    assert str(markdown).endswith("line 7: lists and mappings nested at most 64 deep")


def test_yaml_aliases_are_counted_and_a_recursive_one_is_refused() -> None:
    many = "a: &a x\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\ntasks: []\n"
    error = refused(many)
    assert error.field == "line 2" and f"the limit is {MAX_YAML_ALIASES:,}" in error.expected
    assert refused("a: &a [1, *a]\n").expected == "no alias inside the node it names"


def test_a_yaml_plan_with_a_few_aliases_still_loads() -> None:
    text = (
        "tasks:\n"
        "  - id: a\n    goal: g\n    acceptance_criteria: &criteria [is good, is sourced]\n"
        "  - id: b\n    goal: g\n    acceptance_criteria: *criteria\n"
    )
    plan = parse_plan(text)
    assert plan.tasks[1].acceptance_criteria == ["is good", "is sourced"]


def test_an_alias_bomb_is_refused_with_little_memory() -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = "\n".join([*lines, "tasks: [{id: t, goal: g}]"])
    tracemalloc.start()
    try:
        error = refused(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.field == "line 6" and "with its aliases expanded" in error.expected
    assert peak < 5 * 1024 * 1024, f"{peak:,} bytes"


# --- JSON -----------------------------------------------------------------------------


def test_decode_json_refuses_size_before_decoding_and_depth_after() -> None:
    with pytest.raises(ProtocolError) as big:
        decode_json(" " * (MAX_MESSAGE_BYTES + 1))
    assert (
        big.value.expected == f"{MAX_MESSAGE_BYTES + 1:,} bytes; the limit is {MAX_MESSAGE_BYTES:,}"
    )
    assert decode_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    for depth in (MAX_JSON_DEPTH + 1, 960, 100_000):
        with pytest.raises(ProtocolError) as deep:
            decode_json("[" * depth + "]" * depth)
        assert deep.value.expected == "objects and lists nested at most 64 deep"


def test_decode_json_refuses_an_integer_too_long_to_convert() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_json('{"n": ' + "9" * 5000 + "}")
    assert "valid JSON" in caught.value.expected


@pytest.mark.parametrize(
    "text",
    [
        '{"tasks": ' + "9" * 5000 + "}",
        "tasks: " + "9" * 5000,
        "tasks: [{id: a, goal: g, input: {at: 2024-13-45}}]",
        "tasks: !!binary 'not base64 at all!'",
        "tasks: [{id: a, goal: !!timestamp }]",
    ],
    ids=["json-int", "yaml-int", "yaml-date", "yaml-binary", "yaml-empty-timestamp"],
)
def test_a_value_the_yaml_constructor_refuses_is_a_protocol_error(text: str) -> None:
    assert "\n" not in str(refused(text))


def test_check_depth_walks_a_deep_value_without_recursing() -> None:
    value: object = 1
    for _ in range(100_000):
        value = [value]
    with pytest.raises(ProtocolError):
        check_depth(value, "artifact")


# --- command output -------------------------------------------------------------------


def _run(script: str) -> TaskResult:
    envelope = parse_envelope(ENVELOPE)
    command = [sys.executable, "-c", script]
    return CommandExecutor(command).execute(envelope, TaskContext(worker_id="w1", team="t"))


def test_command_stdout_over_the_result_limit_is_a_failed_attempt_saying_how_large() -> None:
    result = _run("import sys; sys.stdout.write('[' + '1,' * 600000 + '1]')")
    assert result.status == "failed"
    reason = result.notes.uncertain[0]
    assert reason.startswith("stdout was 1.1 MiB (1,200,003 bytes); the limit is 252 KiB"), reason


def test_command_stderr_is_kept_to_its_tail_however_long() -> None:
    result = _run("import sys; sys.stderr.write('e' * 5_000_000 + 'THE END'); sys.exit(3)")
    output = result.evidence[0].output
    assert output.endswith("THE END") and len(output) <= 4000


def test_command_stdout_nested_too_deep_is_a_failed_attempt_not_a_crash() -> None:
    result = _run("print('{\"a\":' * 960 + '1' + '}' * 960)")
    assert result.status == "failed"
    assert "nested at most 64 deep" in result.notes.uncertain[0]


# --- tenure validate --------------------------------------------------------------------


def test_validate_refuses_a_file_over_the_message_limit_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "msg.json"
    with path.open("wb") as handle:
        handle.truncate(1024 * 1024 * 1024)  # 1 GiB, sparse
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"(message): 1,073,741,824 bytes; the limit is {MAX_MESSAGE_BYTES:,}" in done.stderr
