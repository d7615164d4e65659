"""A coding run in a Tenure store (real SQLite files, the real Redis): the register mirrors
status.yml, the event log tells the run, and every write is fenced by the leader's epoch."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenure.coord import LeaseTiming
from tenure.executors.agent_cli import AgentCLI
from tenure.protocol.errors import LeaseLost, StaleEpoch
from tenure.protocol.taskspec import TaskSpec
from tenure.roles.coding import CodingConfig, CodingLeader, RunLeased
from tenure.roles.coding.lease import claim_run, route
from tenure.roles.register import Register
from tenure.store import open_store

from .conftest import fix_task, make_plan, sh

Agent = Callable[[dict[str, Any]], AgentCLI]


def epochs_in_log(repo: Path, branch: str = "tenure/r1/integration") -> list[int]:
    """The Tenure-Epoch trailer of every commit on the branch, oldest first."""
    text = sh(repo, "log", "--reverse", "--format=%(trailers:key=Tenure-Epoch,valueonly)", branch)
    return [int(line) for line in text.split() if line.strip()]


def test_a_run_is_a_team_in_the_store(repo: Path, agent: Agent, store_url: str) -> None:
    cli = agent(
        {
            "t1": {"file": "m1.py", "modes": ["lie", "fix"]},
            "t2": {"file": "m2.py", "modes": ["fix"]},
        }
    )
    plan = make_plan([fix_task(1), fix_task(2, depends_on=["t1"])])
    config = CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1", store_url=store_url)
    assert CodingLeader(config).run().done
    with open_store(store_url) as store:
        assert "code/r1" in store.teams()
        records = {t.task_id: t for t in store.tasks("code/r1")}
        assert {k: r.state for k, r in records.items()} == {"t1": "done", "t2": "done"}
        t1 = records["t1"]
        assert t1.attempt == 2 and t1.assignee and t1.assignee.startswith("worker-")
        assert t1.data["coding_state"] == "merged" and t1.data["branch"] == "tenure/r1/t1/2"
        assert t1.spec["scope"] == ["m1.py"] and records["t2"].spec["depends_on"] == ["t1"]
        events = store.events("code/r1")
        kinds = [e.kind for e in events]
        for kind in ("started", "dispatched", "rejected", "accepted", "merged", "finished"):
            assert f"code.{kind}" in kinds, kinds
        rejected = next(e for e in events if e.kind == "code.rejected")
        assert rejected.data["task_id"] == "t1" and "assert" in rejected.data["reason"]
        assert kinds[-1] == "lease.released" and store.current_lease("code/r1") is None
        assert {e.epoch for e in events if e.kind.startswith("code.")} == {1}
    status = yaml.safe_load(sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/status.yml"))
    assert status["epoch"] == 1
    assert set(epochs_in_log(repo)) == {1}  # every integration commit names its leader's epoch


def test_the_default_store_is_a_file_in_the_repository(repo: Path, agent: Agent) -> None:
    cli = agent({"t1": {"file": "m1.py", "modes": ["fix"]}})
    plan = make_plan([fix_task(1)])
    assert CodingLeader(CodingConfig(repo=repo, plan=plan, agent=cli, run_id="r1")).run().done
    with open_store(f"sqlite:///{repo / '.tenure/state.db'}") as store:
        assert store.get_task("code/r1", "t1").state == "done"
    assert sh(repo, "status", "--porcelain") == ""  # never shows up as a change


def test_register_writes_of_a_leader_whose_lease_expired_are_refused(store_url: str) -> None:
    with open_store(store_url) as old_store, open_store(store_url) as new_store:
        old = claim_run(old_store, "r1", LeaseTiming(ttl=0.5))
        assert old.epoch == 1
        old_register = Register(old_store, "code/r1", old.check)
        record = old_register.create("t1", TaskSpec(id="t1", goal="g"))
        # as if paused: it renews no more, and the store's clock lets the lease expire
        while new_store.current_lease("code/r1") is not None:
            time.sleep(0.05)
        new = claim_run(new_store, "r1", LeaseTiming(ttl=30))
        assert new.epoch == 2
        with open_store(store_url) as third_store, pytest.raises(
            RunLeased, match=r"already led by .* \(epoch 2"
        ):
            claim_run(third_store, "r1", LeaseTiming(ttl=30))  # nobody else leads meanwhile
        with pytest.raises(LeaseLost):  # the old leader's own deadline passed: it stops
            old_register.move(record, "running")
        with pytest.raises(StaleEpoch):  # and the store refuses it even if it tried
            old_store.transition("code/r1", "t1", epoch=1, expect=["queued"], to="running")
        moved = Register(new_store, "code/r1", new.check).move(record, "running")
        assert new_store.get_task("code/r1", "t1").state == moved.state == "running"
        new.release()


def test_route_follows_the_register_transitions() -> None:
    assert route("queued", "done") == ["running", "review", "done"]
    assert route("review", "queued") == ["queued"]
    assert route("done", "queued") == []
