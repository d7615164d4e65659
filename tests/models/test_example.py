"""examples/vendor-pricing runs as written: with scripted models, and with an LLM leader and
LLM workers talking to the local wire-format server through the real SDKs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tenure.models import ChatMessage, guard

from .conftest import ServerFactory
from .wire_server import Reply, answer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vendor-pricing"
EXPECTED = {"acme": 29.0, "bluefin": 45.0, "corvid": 12.0, "dunmore": 60.0, "quillsoft": None}


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"vendor_pricing_{name}", EXAMPLE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prices(workdir: Path) -> dict[str, Any]:
    rows = json.loads((workdir / "pricing.json").read_text())
    return {row["vendor"]: row["monthly_usd"] for row in rows}


def brain_responder(provider: str, body: dict[str, Any]) -> Reply:
    """The example's scripted brain behind the wire: OpenAI or Anthropic request in."""
    messages = []
    if provider == "anthropic" and body.get("system"):
        messages.append(ChatMessage("system", body["system"]))
    for message in body["messages"]:
        messages.append(ChatMessage(message["role"], message["content"]))
    return answer(load("brain").respond(messages))


def test_the_example_runs_as_written_with_scripted_models(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TENURE_", "OPENAI", "ANTHROPIC"))
    }
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py"), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "model: scripted:vendor-pricing-brain; 6 tasks" in proc.stdout
    assert "every price as published" in proc.stdout
    assert "spend:" in proc.stdout
    assert prices(tmp_path) == EXPECTED


def test_the_example_runs_twice_in_one_directory(tmp_path: Path) -> None:
    """A second run in the same --workdir starts afresh: no leftover register or file."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TENURE_", "OPENAI", "ANTHROPIC"))
    }
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, str(EXAMPLE / "run.py"), "--workdir", str(tmp_path), "--fixed-plan"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
        assert "vendor-pricing: done (6 done)" in proc.stdout
        assert prices(tmp_path) == EXPECTED


def test_the_fixed_plan_is_the_plan_the_scripted_planner_makes(tmp_path: Path) -> None:
    run = load("run")
    assert run.main(["--workdir", str(tmp_path / "a"), "--fixed-plan"]) == 0
    assert prices(tmp_path / "a") == EXPECTED


def test_an_llm_leader_and_llm_workers_over_the_openai_wire(
    wire: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = wire(responder=brain_responder)
    monkeypatch.setenv("TENURE_MODEL", f"openai:brain@{server.openai_url}")
    assert load("run").main(["--workdir", str(tmp_path)]) == 0
    assert prices(tmp_path) == EXPECTED
    planner_calls = [r for r in server.requests if "planner" in r["messages"][0]["content"]]
    assert len(planner_calls) == 1
    assert len(server.requests) == 7  # one plan, six tasks
    assert all(r["response_format"]["type"] == "json_schema" for r in server.requests)


def test_tenure_run_plans_with_a_model_and_runs_llm_workers_over_the_anthropic_wire(
    wire: ServerFactory, tmp_path: Path
) -> None:
    server = wire(responder=brain_responder)
    load("run").prepare(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENURE_", "ANTHROPIC"))}
    env.update(
        {
            guard.ENV_ALLOW: server.base,
            "COLUMNS": "200",
            "NO_COLOR": "1",
        }
    )
    model = f"anthropic:brain@{server.anthropic_url}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenure",
            "run",
            "--goal",
            "Price every vendor from its page into pricing.json.",
            "--artifact",
            "vendors/",
            "--model",
            model,
            "--exec",
            "llm",
            "--mode",
            "local",
            "--workers",
            "3",
            "--team",
            "vendor-pricing",
            "--store",
            f"sqlite:///{tmp_path / 'state.db'}",
            "--state-dir",
            str(tmp_path / ".tenure"),
            "--workdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "planned 6 tasks in 1 call," in proc.stdout
    assert prices(tmp_path) == EXPECTED
    assert (tmp_path / ".tenure" / "plan-vendor-pricing.yaml").is_file()
    assert all(r["tool_choice"]["name"] == "answer" for r in server.requests)
    status = subprocess.run(
        [sys.executable, "-m", "tenure", "status", "--store", f"sqlite:///{tmp_path / 'state.db'}"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert status.returncode == 0, status.stderr
    assert "spend" in status.stdout and "tokens" in status.stdout


def test_the_coordination_token_benchmark_measures_the_example_plan(tmp_path: Path) -> None:
    import shutil

    bench = EXAMPLE.parents[1] / "bench" / "coordination_tokens.py"
    spec = importlib.util.spec_from_file_location("coordination_tokens", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shutil.copytree(EXAMPLE / "vendors", tmp_path / "vendors")
    from tenure.protocol import load_plan

    rows = module.measure(load_plan(EXAMPLE / "plan.yaml"), tmp_path)
    assert [r["task"] for r in rows][-1] == "merge"
    for row in rows:
        assert row["envelope"] == row["bare"] + row["envelope_added"]
        assert row["envelope"] > row["bare"] and row["restatement"] > 0
        assert row["repair_call"] > row["envelope"]
    assert "| **mean** |" in module.table(rows)
