"""Coding runs and secrets: what an agent echoes never lands in git or the store, the
start line shows the store URL redacted, and an agent's text cannot drive the terminal."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader

from .conftest import fix_task, make_plan, sh

SECRET = "sk-coding-9a8b7c6d5e4f3a2b"

AGENT = """\
import os, sys
from pathlib import Path
secret = Path(sys.argv[1]).read_text().strip()  # from a file: the agent has no key in its env
result = Path(sys.argv[2])
attempt = int(os.environ["TENURE_ATTEMPT"])
print(f"agent: logging in with {secret}")
if attempt == 1:
    sys.exit(3)
Path("m1.py").write_text("def value():\\n    return 1\\n")
result.write_text(f"## Changed\\n\\nm1.py (used {secret})\\n\\n## Verification\\n\\nran it\\n")
"""


def agent_cli(tmp_path: Path) -> AgentCLI:
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "agent.py").write_text(AGENT)
    return AgentCLI.from_spec(
        f"script:{sys.executable} {tmp_path / 'agent.py'} {tmp_path / 'secret.txt'} {{result_file}}"
    )


def test_what_an_agent_echoes_lands_neither_in_git_nor_in_the_store(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    check = f"cat {tmp_path / 'secret.txt'}; {fix_task(1)['checks'][0]['run']}"
    task = fix_task(1, checks=[{"kind": "command", "run": check}], goal=f"fix m1 ({SECRET})")
    config = CodingConfig(
        repo=repo, plan=make_plan([task], max_attempts=2), agent=agent_cli(tmp_path), run_id="r1"
    )
    outcome = CodingLeader(config).run()
    assert outcome.done, outcome.reason
    history = sh(repo, "log", "-p", "--all", "--format=%H %s%n%b")
    tracked = sh(repo, "grep", "-I", "-c", "", "tenure/r1/integration", "--", ".tenure/runs")
    assert "tasks/t1.md" in tracked and "results/t1.md" in tracked
    task_md = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/tasks/t1.md")
    assert "Attempt 1 failed" in task_md and "logging in with ***" in task_md
    result_md = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/results/t1.md")
    assert "(used ***)" in result_md
    assert SECRET not in history
    with closing(sqlite3.connect(repo / ".tenure" / "state.db")) as conn, conn:  # closed, and committed
        for table in ("tasks", "events", "messages", "effects"):
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()  # noqa: S608
            assert SECRET not in repr(rows), table
    assert oct((repo / ".tenure").stat().st_mode & 0o777) == oct(0o700)
    assert oct((repo / ".tenure" / "attempts" / "r1").stat().st_mode & 0o777) == oct(0o700)


NASTY = "\x1b[31mRED\x1b]8;;http://evil.example\x1b\\x\x1b]8;;\x1b\\ [bold red]LOUD[/] a\rb"


def test_tenure_code_prints_a_refused_store_url_redacted(repo: Path, tmp_path: Path) -> None:
    """A SQLite URL takes no options: one carrying a password is refused, and the line
    saying so does not show it."""
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"team": "code", "tasks": [fix_task(1)]}))
    env = {k: v for k, v in os.environ.items() if k != "TENURE_STORE"}
    env.update(TENURE_STORE=f"sqlite:///{tmp_path / 'run.db'}?password=pw-in-the-url-77")
    argv = [sys.executable, "-m", "tenure", "code", str(tmp_path / "plan.yaml"), "--repo", str(repo)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "pw-in-the-url-77" not in output and "password=***" in output
    assert "Traceback" not in output and not (tmp_path / "run.db").exists()


def test_tenure_code_escapes_agent_text(repo: Path, tmp_path: Path) -> None:
    fixer = tmp_path / "fixer.py"
    fixer.write_text(
        'from pathlib import Path\nPath("m1.py").write_text("def value():\\n    return 1\\n")\n'
    )
    nasty = tmp_path / "nasty.py"
    nasty.write_text(f"import sys\nsys.stdout.write({NASTY!r})\nsys.exit(1)\n")
    # passes in the attempt's worktree, fails (printing the nasty text) on the integration branch
    check = (
        f'case "$PWD" in */integration) {sys.executable} {nasty};; '
        f'*) {sys.executable} -c "import m1; assert m1.value() == 1";; esac'
    )
    plan = {"team": "code", "tasks": [fix_task(1, checks=[{"kind": "command", "run": check}])]}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    url = f"sqlite:///{tmp_path / 'run.db'}"
    env = {k: v for k, v in os.environ.items() if k != "TENURE_STORE"}
    env.update(COLUMNS="250", NO_COLOR="1", TERM="dumb", TENURE_STORE=url)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenure",
            "code",
            str(tmp_path / "plan.yaml"),
            "--repo",
            str(repo),
            "--agent",
            f"script:{sys.executable} {fixer}",
            "--run",
            "r2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "integration checks failed" in output
    assert "\x1b" not in output and "\r" not in output, json.dumps(output)
    assert "\\x1b[31mRED" in output and "[bold red]LOUD" in output
