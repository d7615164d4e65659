"""docs/python-api.md runs as written: its scripts are taken from the page and run in a
fresh directory, the first one twice (the second run resumes the first's register),
then each block marked to run after it, in the page's order. A block that cannot run
on its own (a signature, one that needs a Redis server or your own code) says why."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import tenure

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"
TEXT = DOC.read_text(encoding="utf-8")


def runnable(name: str) -> str:
    """The ```python block right after ``<!-- runnable: NAME -->``."""
    marker = f"<!-- runnable: {name} -->\n```python\n"
    start = TEXT.index(marker) + len(marker)
    return TEXT[start : TEXT.index("```\n", start)]


def run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


BLOCK = re.compile(r"(?:<!-- (?P<mark>[^>]*) -->\n)?```python\n(?P<code>.*?)```\n", re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    """Every ```python block of the page: (its marker, its code)."""
    return [(m["mark"] or "", m["code"]) for m in BLOCK.finditer(TEXT)]


def test_every_block_runs_or_says_why_it_cannot() -> None:
    found = blocks()
    assert len(found) >= 8
    for mark, code in found:
        kind = mark.split(":")[0].strip()
        assert kind in ("runnable", "runnable after first-team", "fragment"), code[:80]
        if kind == "fragment":
            assert len(mark.split(":", 1)[1].strip()) > 10, mark  # a reason, not a shrug
    assert sum(m.startswith("runnable after") for m, _ in found) >= 5


def test_the_first_team_runs_as_written_twice_in_a_row(tmp_path: Path) -> None:
    script = runnable("first-team")
    assert len(script.strip().splitlines()) <= 16  # "a 15-line script"
    for _ in range(2):
        proc = run(script, tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout == "done 12\n"
        assert proc.stderr == ""
    assert (tmp_path / ".tenure" / "state.db").is_file()
    status = subprocess.run(
        [sys.executable, "-m", "tenure", "status", "--team", "hello"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert status.returncode == 0 and "greeting" in status.stdout
    later = [code for mark, code in blocks() if mark == "runnable after first-team"]
    for code in later:  # in the page's order, on the register the first team left
        proc = run(script + "\n" + code, tmp_path)
        assert proc.returncode == 0, code + proc.stdout + proc.stderr
        assert proc.stderr == "", proc.stderr
    last = proc.stdout.splitlines()[-1]  # the replan: revision 2, two tasks dropped
    assert last.startswith("2 ['total', 'greeting']"), last


def test_the_hook_example_stops_the_task_at_once(tmp_path: Path) -> None:
    proc = run(runnable("hook"), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "failed 1\n"


def test_every_tenure_name_the_page_uses_is_public() -> None:
    """The page's Python blocks parse, and each ``tenure.X`` they use is in ``__all__``."""
    blocks = re.findall(r"```python\n(.*?)```\n", TEXT, flags=re.DOTALL)
    assert len(blocks) >= 8
    used = set()
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "tenure"
            ):
                used.add(node.attr)
    used |= set(re.findall(r"`tenure\.([A-Za-z][A-Za-z_]*)", TEXT))
    assert sorted(used - set(tenure.__all__)) == []
    assert len(used) > 30


def test_the_readme_links_the_page() -> None:
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "(docs/python-api.md)" in readme
