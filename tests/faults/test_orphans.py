"""A worker SIGKILLed while its command executor runs (the command in its own session,
with a helper in yet another session): the command dies with the worker, the helper it
left is reaped by the task's next holder, and the effect happens once."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import FAULTS_DIR, Team, of_kind

pytestmark = pytest.mark.slow

AGENT = f"command:{sys.executable} {FAULTS_DIR / 'command_agent.py'}"


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for init to collect it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's")
def test_sigkill_of_a_worker_kills_its_command_and_the_next_holder_reaps_the_rest(
    team: Team,
) -> None:
    children = team.dir / "children.jsonl"
    os.environ["TENURE_FAULTS_CHILDREN"] = str(children)  # the workers inherit it
    try:
        task_ids = team.write_plan(3)
        plan = yaml.safe_load(team.plan_path.read_text(encoding="utf-8"))
        for task in plan["tasks"]:
            del task["output_schema"]  # the ledger agent's artifact shape, not this one's
        team.plan_path.write_text(yaml.safe_dump(plan), encoding="utf-8")
        common = ("--pass-env", "TENURE_FAULTS_*")
        team.worker("w1", *common, "--priority", "10", sleep="60", executor=AGENT)
        team.worker("w2", *common, sleep="0.2", executor=AGENT)
        team.leader("L1", 30)

        first = team.wait_for(
            "w1's command to start its helper",
            lambda: [c for c in _lines(children) if c["worker"] == "w1"],
            30,
        )[0]
        team.signal("w1", signal.SIGKILL)
        team.wait_for("w1's command to die with it", lambda: _dead(first["pid"]), 10)
        # the helper left the command's group: the next holder finds it by its mark
        reaped = team.wait_event(
            "worker.orphan_reaped", 30, lambda e: e.data.get("pid") == first["helper"]
        )
        assert reaped.data["member"] == "w2"
        team.wait_for("the helper to be dead", lambda: _dead(first["helper"]), 10)

        tasks = team.wait_settled(60)
    finally:
        del os.environ["TENURE_FAULTS_CHILDREN"]
    assert all(t.state == "done" for t in tasks), [(t.task_id, t.state) for t in tasks]
    ledger = team.ledger()
    assert sorted(ledger.per_task().items()) == [(t, 1) for t in task_ids]
    [line] = ledger.of(first["task_id"])
    assert line["worker"] == "w2" and line["attempt"] >= 2
    # what the command saw in its environment is the envelope's own key
    assert all(line["env_key"] == line["envelope_key"] for line in ledger.lines)
    assert all(
        line["env_key"] == f"{line['task_id']}:attempt-{line['attempt']}" for line in ledger.lines
    )
    recorded = [t for t in tasks if t.task_id == first["task_id"]][0].data.get("children", [])
    assert any(c["pid"] == first["pid"] and c["member"] == "w1" for c in recorded)
    assert of_kind(team.events(), "worker.orphan_reaped")
