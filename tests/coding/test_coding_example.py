"""The README's example: scripted agents fix examples/coding-team in parallel, no API key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-team" / "run.py"


def test_the_coding_team_example_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--dir", str(tmp_path / "textkit")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the whole suite passes" in proc.stdout
    status = (tmp_path / "textkit/.tenure/runs/demo/status.yml").read_text()
    assert status.count("state: merged") == 3
