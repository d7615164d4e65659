"""The A2A and MCP examples run as the README gives them, twice in a row in one directory,
with no traceback: each is a whole team in real processes (a leader, `tenure mcp` or an
A2A server, a scripted agent) and the operator answering through the public API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["mcp-worker", "a2a-team"])
def test_the_example_runs_twice_in_a_row(example: str, tmp_path: Path) -> None:
    for run in (1, 2):
        proc = subprocess.run(
            [sys.executable, str(EXAMPLES / example / "run.py")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"run {run}:\n{said}"
        assert "Traceback" not in said, f"run {run}:\n{said}"
