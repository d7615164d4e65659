"""The README's main job: `tenure demo` catches every fault it injects and exits 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_demo_catches_every_injected_fault(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "tenure", "demo", "--dir", str(demo_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    shown = run.stdout + run.stderr
    assert run.returncode == 0, shown
    assert "Traceback" not in shown
    for fault in (
        "leader SIGKILLed",
        "leader paused past TTL",
        "every message sent twice",
        "worker claimed success without evidence",
    ):
        line = next(x for x in shown.splitlines() if fault in x)
        assert "yes" in line and "NO" not in line, line
    rows = json.loads((demo_dir / "pricing.json").read_text())
    assert [r["vendor"] for r in rows] == ["acme", "bluefin", "corvid", "dunmore", "quillsoft"]
    assert rows[-1]["monthly_usd"] is None  # unknown stays null, never guessed
