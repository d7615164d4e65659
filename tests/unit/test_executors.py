"""Executors: one envelope in, one result out, whatever the thing behind them does.

The command executor is exercised with real subprocesses (the Python running
the tests), including a child that outlives its parent, to prove a deadline
overrun kills the whole process group.
"""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tenure.executors import (
    CommandExecutor,
    NoopExecutor,
    PythonExecutor,
    SleepExecutor,
    TaskContext,
    make_result,
    resolve_executor,
)
from tenure.protocol import (
    CommandEvidence,
    ProtocolError,
    TaskEnvelope,
    TaskResult,
    idempotency_key,
)


def envelope(task_id: str = "t1", *, attempt: int = 1, deadline: float = 10.0) -> TaskEnvelope:
    return TaskEnvelope.model_validate(
        {
            "task_id": task_id,
            "idempotency_key": idempotency_key(task_id, attempt),
            "epoch": 3,
            "attempt": attempt,
            "assigned_to": "w1",
            "deadline_seconds": deadline,
            "goal": "add two numbers",
            "acceptance_criteria": ["the sum is right"],
            "input": {"a": 2, "b": 3},
        }
    )


def ctx(**kwargs: Any) -> TaskContext:
    return TaskContext(worker_id="w1", team="unit", **kwargs)


def python_command(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def evidence_output(result: TaskResult) -> str:
    return "\n".join(e.output for e in result.evidence if isinstance(e, CommandEvidence))


def alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie waiting for init to reap it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- CommandExecutor ------------------------------------------------------------------


def test_command_gets_the_envelope_on_stdin_and_its_stdout_json_is_the_result() -> None:
    command = python_command(
        """
        import json, os, sys
        env = json.load(sys.stdin)
        out = {
            "status": "completed",
            "artifact": {
                "sum": env["input"]["a"] + env["input"]["b"],
                "goal": env["goal"],
                "key": env["idempotency_key"],
                "task_from_env": os.environ["TENURE_TASK_ID"],
                "worker_from_env": os.environ["TENURE_WORKER"],
            },
            "notes": {"changed": ["nothing"]},
        }
        print(json.dumps(out))
        """
    )
    result = CommandExecutor(command).execute(envelope(), ctx())
    assert result.status == "completed"
    assert result.artifact == {
        "sum": 5,
        "goal": "add two numbers",
        "key": "t1:attempt-1",
        "task_from_env": "t1",
        "worker_from_env": "w1",
    }
    assert result.task_id == "t1"
    assert result.idempotency_key == "t1:attempt-1"
    assert result.epoch == 3
    assert result.notes.changed == ["nothing"]


def test_command_printing_a_bare_json_value_completes_with_it_as_artifact() -> None:
    result = CommandExecutor(python_command("print('[1, 2, 3]')")).execute(envelope(), ctx())
    assert result.status == "completed"
    assert result.artifact == [1, 2, 3]


def test_command_nonzero_exit_is_failed_with_stderr_as_evidence() -> None:
    command = python_command(
        """
        import sys
        sys.stdin.read()
        print("compiler says: missing semicolon", file=sys.stderr)
        sys.exit(4)
        """
    )
    result = CommandExecutor(command).execute(envelope(), ctx())
    assert result.status == "failed"
    assert any("status 4" in note for note in result.notes.uncertain)
    assert "missing semicolon" in evidence_output(result)
    assert any(
        isinstance(e, CommandEvidence) and e.exit_code != 0 and sys.executable in e.command
        for e in result.evidence
    )


def test_command_unparseable_stdout_is_failed_with_the_parse_error() -> None:
    result = CommandExecutor(python_command("print('I did it, trust me')")).execute(
        envelope(), ctx()
    )
    assert result.status == "failed"
    reason = " ".join(result.notes.uncertain)
    assert "stdout is not JSON" in reason
    assert "line 1" in reason
    assert "trust me" in evidence_output(result)


def test_command_result_shaped_but_invalid_stdout_is_failed_naming_the_field() -> None:
    command = python_command("""print('{"status": "blocked"}')""")  # blocked needs a question
    result = CommandExecutor(command).execute(envelope(), ctx())
    assert result.status == "failed"
    reason = " ".join(result.notes.uncertain)
    assert "not a valid result" in reason
    assert "question" in reason


def test_command_deadline_overrun_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    command = python_command(
        f"""
        import pathlib, subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        pathlib.Path({str(pidfile)!r}).write_text(str(child.pid))
        time.sleep(60)
        """
    )
    started = time.monotonic()
    result = CommandExecutor(command, grace_seconds=0.5).execute(envelope(deadline=1.0), ctx())
    elapsed = time.monotonic() - started
    assert result.status == "failed"
    assert any("deadline of 1s exceeded" in note for note in result.notes.uncertain)
    assert elapsed < 10
    child = int(pidfile.read_text())
    for _ in range(100):
        if not alive(child):
            break
        time.sleep(0.02)
    assert not alive(child), "the grandchild outlived the deadline kill"


def test_command_not_found_is_failed() -> None:
    result = CommandExecutor("tenure-no-such-binary-xyz --flag").execute(envelope(), ctx())
    assert result.status == "failed"
    reason = " ".join(result.notes.uncertain)
    assert "cannot start 'tenure-no-such-binary-xyz'" in reason


def test_command_runs_in_the_context_workdir(tmp_path: Path) -> None:
    command = python_command("import json, os; print(json.dumps({'cwd': os.getcwd()}))")
    result = CommandExecutor(command).execute(envelope(), ctx(workdir=tmp_path))
    assert result.status == "completed"
    assert Path(result.artifact["cwd"]).resolve() == tmp_path.resolve()


def test_empty_command_is_refused() -> None:
    with pytest.raises(ProtocolError) as info:
        CommandExecutor("   ")
    assert info.value.field == "command"


# --- PythonExecutor -------------------------------------------------------------------


def test_python_function_returning_an_artifact_completes() -> None:
    def add(env: TaskEnvelope, context: TaskContext) -> dict[str, int]:
        return {"sum": env.input["a"] + env.input["b"]}

    result = PythonExecutor(add).execute(envelope(), ctx())
    assert result.status == "completed"
    assert result.artifact == {"sum": 5}
    assert result.idempotency_key == "t1:attempt-1"


def test_python_function_returning_a_result_keeps_it() -> None:
    def refuse(env: TaskEnvelope, context: TaskContext) -> TaskResult:
        return make_result(env, "refused", notes={"uncertain": ["out of scope"]})

    result = PythonExecutor(refuse).execute(envelope(), ctx())
    assert result.status == "refused"
    assert result.notes.uncertain == ["out of scope"]


def test_python_function_returning_a_result_dict_is_completed_with_ids() -> None:
    def ask(env: TaskEnvelope, context: TaskContext) -> dict[str, Any]:
        return {"status": "blocked", "question": "which currency?"}

    result = PythonExecutor(ask).execute(envelope(), ctx())
    assert result.status == "blocked"
    assert result.question == "which currency?"
    assert result.task_id == "t1"


def test_python_function_that_raises_becomes_a_failed_result() -> None:
    def broken(env: TaskEnvelope, context: TaskContext) -> None:
        raise ValueError("division by zero in the pricing model")

    result = PythonExecutor(broken).execute(envelope(), ctx())
    assert result.status == "failed"
    assert "ValueError: division by zero in the pricing model" in result.notes.uncertain


def test_python_function_returning_an_invalid_result_is_failed() -> None:
    def sloppy(env: TaskEnvelope, context: TaskContext) -> dict[str, Any]:
        return {"status": "done-ish"}

    result = PythonExecutor(sloppy).execute(envelope(), ctx())
    assert result.status == "failed"
    assert "invalid result" in " ".join(result.notes.uncertain)
    assert "status" in " ".join(result.notes.uncertain)


# --- registry specs -------------------------------------------------------------------


def test_spec_noop_completes_at_once() -> None:
    executor = resolve_executor("noop")
    assert isinstance(executor, NoopExecutor)
    assert executor.execute(envelope(), ctx()).status == "completed"


def test_spec_sleep_takes_its_time_and_checks_in() -> None:
    executor = resolve_executor("sleep:0.1")
    assert isinstance(executor, SleepExecutor)
    seen: list[tuple[str, float | None]] = []
    started = time.monotonic()
    result = executor.execute(envelope(), ctx(report_progress=lambda m, f: seen.append((m, f))))
    assert time.monotonic() - started >= 0.1
    assert result.status == "completed"
    assert result.artifact == {"slept": 0.1}
    assert seen == [("halfway", 0.5)]


def test_spec_command_runs_the_command_line() -> None:
    code = "import json,sys; e=json.load(sys.stdin); print(json.dumps({'echo': e['task_id']}))"
    executor = resolve_executor(f"command:{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    assert isinstance(executor, CommandExecutor)
    result = executor.execute(envelope(), ctx())
    assert result.status == "completed"
    assert result.artifact == {"echo": "t1"}


@pytest.fixture
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = "tenure_unit_agents"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from tenure.executors import make_result

            def double(envelope, ctx):
                return {"double": envelope.input["a"] * 2}

            class Agent:
                def execute(self, envelope, ctx):
                    return make_result(envelope, artifact={"kind": "object"})

            AGENT = Agent()

            def make_agent():
                return Agent()

            NOT_CALLABLE = 42
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_spec_python_function(agent_module: str) -> None:
    executor = resolve_executor(f"python:{agent_module}:double")
    assert isinstance(executor, PythonExecutor)
    assert executor.execute(envelope(), ctx()).artifact == {"double": 4}


@pytest.mark.parametrize("attr", ["AGENT", "make_agent"])
def test_spec_python_executor_object_or_factory(agent_module: str, attr: str) -> None:
    executor = resolve_executor(f"python:{agent_module}:{attr}")
    assert type(executor).__name__ == "Agent"
    assert executor.execute(envelope(), ctx()).artifact == {"kind": "object"}


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("", "one of noop"),
        ("bogus", "one of noop"),
        ("noop:extra", "one of noop"),
        ("sleep:", "sleep:SECONDS"),
        ("sleep:soon", "sleep:SECONDS"),
        ("sleep:-1", "sleep:SECONDS"),
        ("sleep:nan", "sleep:SECONDS"),
        ("sleep:inf", "sleep:SECONDS"),
        ("command:", "one of noop"),
        ("command:   ", "one of noop"),
        ("command:echo 'unbalanced", "No closing quotation"),
        ("python:", "one of noop"),
        ("python:json", "python:MODULE:ATTR"),
        ("python:tenure_no_such_module_xyz:fn", "importable module"),
        ("python:json:no_such_attribute", "no attribute"),
    ],
)
def test_bad_specs_raise_protocol_error_naming_the_field(spec: str, says: str) -> None:
    with pytest.raises(ProtocolError) as info:
        resolve_executor(spec)
    assert info.value.field == "executor"
    assert says in str(info.value)
    with pytest.raises(ProtocolError) as info:
        resolve_executor(spec, field="--exec")
    assert info.value.field == "--exec"


def test_bad_spec_not_callable_is_refused(agent_module: str) -> None:
    with pytest.raises(ProtocolError) as info:
        resolve_executor(f"python:{agent_module}:NOT_CALLABLE", field="tasks[0].executor")
    assert info.value.field == "tasks[0].executor"
    assert "not a function or an executor" in str(info.value)


def test_command_output_is_json_serialisable_result() -> None:
    """A command result survives the trip into the idempotency ledger (plain JSON)."""
    result = CommandExecutor(python_command("print('{\"x\": 1}')")).execute(envelope(), ctx())
    assert json.loads(result.model_dump_json())["artifact"] == {"x": 1}
