from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenure.executors.agent_cli import AgentCLI
from tenure.protocol import Plan

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with four broken modules and a shared file."""
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    sh(root, "config", "user.name", "test")
    sh(root, "config", "user.email", "test@example.com")
    for i in range(1, 5):
        (root / f"m{i}.py").write_text("def value():\n    return 0\n")
    (root / "shared.py").write_text("OWNER = None\n")
    (root / "README.txt").write_text("a small repository\n")
    (root / ".gitignore").write_text(".tenure/\n")  # as many projects do
    sh(root, "add", "-A")
    sh(root, "commit", "-q", "-m", "initial")
    return root


def make_plan(tasks: list[dict[str, Any]], **extra: Any) -> Plan:
    return Plan.model_validate({"team": "code", "goal": "fix the modules", "tasks": tasks, **extra})


def fix_task(i: int, **extra: Any) -> dict[str, Any]:
    check = f'{sys.executable} -c "import m{i}; assert m{i}.value() == 1"'
    return {
        "id": f"t{i}",
        "goal": f"make m{i}.value() return 1",
        "scope": [f"m{i}.py"],
        "checks": [{"kind": "command", "run": check, "timeout_seconds": 30}],
        **extra,
    }


@pytest.fixture
def agent(tmp_path: Path) -> Callable[[dict[str, Any]], AgentCLI]:
    def make(config: dict[str, Any]) -> AgentCLI:
        path = tmp_path / "agent.json"
        path.write_text(json.dumps(config))
        return AgentCLI.from_spec(
            f"script:{sys.executable} {FAKE_AGENT} {path} {{task_file}} {{result_file}}"
        )

    return make
