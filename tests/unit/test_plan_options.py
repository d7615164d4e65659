"""A task option no leader feature reads is refused in every way a plan is run: team,
local and queue mode, ``tenure leader``, ``enqueue_plan``, coding runs, and a plan its
team finished already (refused, not "already done"). One line, exit 1, nothing
registered. Real processes for the command, a real SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

import tenure
from tenure.executors.agent_cli import AgentCLI
from tenure.roles.coding import CodingConfig, CodingLeader

BAD = """\
team: opt
tasks:
  - id: a
    goal: paint it
    options: {colour: red}
"""
REFUSAL = "tasks[0].options.colour: no leader feature reads this option"


class Colour(tenure.LeaderHook):
    """A caller's hook that reads ``colour``: the option is known to it."""

    name: ClassVar[str] = "colour"
    options: ClassVar[frozenset[str]] = frozenset({"colour"})


def tenure_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "200", "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
    )


def refused(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "already done" not in proc.stdout
    return lines[0]


def registered(path: Path) -> list[str]:
    if not path.exists():
        return []
    with tenure.open_store(f"sqlite:///{path}", create=False) as store:
        return [t.task_id for t in tenure.tasks(store, "opt")]


@pytest.mark.parametrize("mode", ["queue", "team", "local"])
def test_every_mode_of_tenure_run_refuses_an_unknown_option(tmp_path: Path, mode: str) -> None:
    (tmp_path / "plan.yaml").write_text(BAD)
    proc = tenure_cli(tmp_path, "run", "plan.yaml", "--mode", mode, "--exec", "noop")
    assert REFUSAL in refused(proc)
    assert registered(tmp_path / ".tenure" / "state.db") == []


def test_a_plan_its_team_finished_is_refused_not_said_done(tmp_path: Path) -> None:
    """A team run from Python with a hook that reads the option finished the plan; the
    same plan from the command line (no such hook) is refused, not "already done"."""
    (tmp_path / "plan.yaml").write_text(BAD)
    db = tmp_path / ".tenure" / "state.db"
    team = tenure.Team(
        tmp_path / "plan.yaml", executor="noop", store=f"sqlite:///{db}", hooks=[Colour()]
    )
    assert team.run(timeout=30).ok
    for args in (["run", "plan.yaml", "--mode", "local"], ["leader", "plan.yaml", "--insecure"]):
        assert REFUSAL in refused(tenure_cli(tmp_path, *args))
    assert registered(db) == ["a"]


def test_enqueue_plan_refuses_before_registering_anything() -> None:
    plan = tenure.parse_plan(BAD)
    with tenure.open_store("memory://") as store:
        with pytest.raises(tenure.ConfigError) as exc:
            tenure.enqueue_plan(store, plan)
        assert str(exc.value).startswith(REFUSAL)
        assert tenure.tasks(store, "opt") == []
        assert store.receive("opt", "work", consumer="x", visibility_timeout=1.0) == []


def test_a_coding_run_refuses_an_option_none_of_its_hooks_reads(tmp_path: Path) -> None:
    plan = tenure.parse_plan(BAD)
    agent = AgentCLI.from_spec("script:true")
    with pytest.raises(tenure.ConfigError) as exc:
        CodingLeader(CodingConfig(repo=tmp_path, plan=plan, agent=agent, check_installed=False))
    assert str(exc.value).startswith(REFUSAL)
    # a hook of the caller's that reads it: the plan passes, and what fails next is the
    # repository (not one), so the options were checked first
    with pytest.raises(tenure.TenureError) as exc:
        config = CodingConfig(repo=tmp_path, plan=plan, agent=agent, hooks=[Colour()])
        CodingLeader(config)
    assert "options" not in str(exc.value)


def test_tenure_code_refuses_it_before_touching_the_repository(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(BAD)
    proc = tenure_cli(
        tmp_path, "code", "plan.yaml", "--workdir", str(tmp_path), "--agent", "script:true"
    )
    assert REFUSAL in refused(proc)
    assert not (tmp_path / ".tenure").exists()
