"""Nested teams with real processes: a parent team whose composite task is led by a
sub-leader (a ``tenure worker --sub-leader`` of the parent) over its own child team.

- SIGKILL of the sub-leader mid-plan: the other candidate, idle in the parent, wins the
  child team's election at a higher child epoch and leads it for the SAME parent attempt
  (the parent moves the attempt to it: attempt 1 throughout, no retry); one result, no
  child task runs twice.
- The same with no candidate standing by: after the grace the parent falls back to a
  new attempt, whose sub-leader adopts the child register.
- SIGKILL of the top leader while children run: the new parent leader adopts the
  composite task's result; no child task runs twice.
- SIGSTOP of the sub-leader, a new parent leader meanwhile, SIGCONT: a stand-in has
  taken the attempt over; the stale sub-leader's report is refused.
"""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

import pytest
import yaml

from tenure.coord.credentials import init_team
from tenure.store import Event, TaskRecord

from .harness import (
    SETTLED,
    TASK_DEADLINE,
    WORKER_TTL,
    Member,
    Team,
    assert_no_stale_writes,
    of_kind,
)
from .ledger_agent import LEDGER_ENV, RETRY_SLEEP_ENV, SLEEP_ENV, STARTED_ENV

pytestmark = pytest.mark.slow

CHILDREN = [f"c{n:02d}" for n in range(1, 9)]
SCHEMA = {
    "type": "object",
    "required": ["task_id", "ledger"],
    "properties": {"ledger": {"type": "object", "required": ["task_id", "epoch"]}},
}


def ledger_task(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "goal": f"record {task_id} in the ledger",
        "deadline_seconds": TASK_DEADLINE,
        "output_schema": SCHEMA,
        **extra,
    }


class Tree:
    """The harness team as the parent, a child team at ``<parent>/sub`` under it."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.child = f"{team.name}/sub"
        plan = {
            "team": team.name,
            "max_attempts": 4,
            "tasks": [
                ledger_task("p1"),
                {
                    "id": "sub",
                    "goal": "record every child task",
                    "depends_on": ["p1"],
                    "deadline_seconds": 120,
                    "team": {"max_attempts": 4, "tasks": [ledger_task(c) for c in CHILDREN]},
                },
                ledger_task("p2", depends_on=["sub"]),
            ],
        }
        team.task_ids = ["p1", "sub", "p2"]
        team.plan_path.write_text(yaml.safe_dump(plan), encoding="utf-8")

    def child_worker(self, name: str, sleep: str = "0.4-0.8") -> Member:
        team = self.team
        args = ["worker", "--store", team.url, "--team", self.child, "--member", name]
        args += ["--exec", "python:ledger_agent:run", "--member-ttl", str(WORKER_TTL)]
        args += ["--state-dir", str(team.dir / "state" / name), "--keys", str(team.keys)]
        init_team(team.keys, self.child, [name])
        env = {
            LEDGER_ENV: str(team.ledger_path),
            STARTED_ENV: str(team.started_path),
            SLEEP_ENV: sleep,
            RETRY_SLEEP_ENV: sleep,
        }
        return team._spawn(name, "worker", args, env)

    def start(self, leaders: list[tuple[str, int]], sub_leaders: int = 2) -> Event:
        for n in (1, 2):
            self.child_worker(f"cw{n}")
        elected = self.team.start(leaders, workers=0)
        self.team.worker("S1", "--sub-leader", sleep="0.1")
        self.team.wait_for("S1 to join", lambda: "S1" in self.team.live_members(), 30)
        if sub_leaders > 1:
            self.team.worker("S2", "--sub-leader", sleep="0.1")
        return elected

    def child_tasks(self) -> list[TaskRecord]:
        return self.team.store.tasks(self.child)

    def child_done(self) -> int:
        return sum(t.state == "done" for t in self.child_tasks())

    def child_holder(self) -> str | None:
        lease = self.team.store.current_lease(self.child)
        return lease.holder if lease else None

    def child_events(self) -> list[Event]:
        return self.team.store.events(self.child, limit=5000)

    def settled(self, timeout: float) -> list[TaskRecord]:
        def probe() -> list[TaskRecord] | None:
            tasks = self.team.store.tasks(self.team.name)
            if len(tasks) == 3 and all(t.state in SETTLED for t in tasks):
                return tasks
            return None

        return self.team.wait_for("the parent plan to settle", probe, timeout)

    def assert_safe(self, tasks: list[TaskRecord]) -> dict[str, Any]:
        """Every task done once, children included; one rolled-up result upward."""
        assert {t.task_id: t.state for t in tasks} == dict.fromkeys(["p1", "sub", "p2"], "done")
        ledger = self.team.ledger().per_task()
        assert ledger == Counter(dict.fromkeys(["p1", "p2", *CHILDREN], 1)), ledger
        started = Counter(line["task_id"] for line in self.team.started())
        twice = {c: n for c, n in started.items() if c in CHILDREN and n != 1}
        assert twice == {}, f"child tasks started more than once: {twice}"
        children = {t.task_id: t for t in self.child_tasks()}
        assert {c: t.state for c, t in children.items()} == dict.fromkeys(CHILDREN, "done")
        [sub] = [t for t in tasks if t.task_id == "sub"]
        assert sub.result is not None
        artifact = sub.result["artifact"]
        assert artifact["team"] == self.child and artifact["states"] == {"done": len(CHILDREN)}
        for c in CHILDREN:  # each child's accepted artifact is the record of its one effect
            assert artifact["tasks"][c]["artifact"] == children[c].result["artifact"]  # type: ignore[index]
        accepted = of_kind(self.team.events(), "task.transition", task_id="sub", to="done")
        assert len(accepted) == 1, accepted
        assert_no_stale_writes(self.team.events())
        assert_no_stale_writes(self.child_events())
        return dict(artifact)


def only_attempt(tasks: list[TaskRecord], events: list[Event], assignee: str) -> TaskRecord:
    """The composite task finished in its first attempt, held last by ``assignee``."""
    [sub] = [t for t in tasks if t.task_id == "sub"]
    assert (sub.assignee, sub.attempt) == (assignee, 1), (sub.assignee, sub.attempt)
    assert sub.data.get("history", []) == []
    assert of_kind(events, "task.retry", task_id="sub") == []
    return sub


def test_sigkill_of_a_sub_leader_mid_plan(team: Team) -> None:
    tree = Tree(team)
    tree.start([("L1", 10)])
    team.wait_for("2 child tasks done", lambda: tree.child_done() >= 2, 60)
    holder = tree.child_holder()
    assert holder in ("S1", "S2") and tree.child_done() < len(CHILDREN)
    first_epoch = team.store.current_epoch(tree.child)
    team.signal(holder, signal.SIGKILL)

    tasks = tree.settled(90)
    tree.assert_safe(tasks)
    survivor = "S2" if holder == "S1" else "S1"
    events = team.events()
    only_attempt(tasks, events, survivor)
    # the child team elected the stand-in: a higher child epoch, held by the other candidate
    assert team.store.current_epoch(tree.child) > first_epoch
    claims = of_kind(tree.child_events(), "lease.claimed", holder=survivor)
    assert claims and all((e.epoch or 0) > first_epoch for e in claims)
    elected = of_kind(tree.child_events(), "leader.elected", leader=survivor)
    assert elected and all((e.epoch or 0) > first_epoch for e in elected)
    assert of_kind(events, "subteam.standing_in", member=survivor, task_id="sub", attempt=1)
    # the parent moved the same attempt to it (no retry), once
    [moved] = of_kind(events, "leader.sub_leader_changed", task_id="sub")
    assert (moved.data["from"], moved.data["to"], moved.data["attempt"]) == (holder, survivor, 1)
    assert moved.data["child_epoch"] > first_epoch


def test_with_no_standby_the_parent_retries_after_the_grace(team: Team) -> None:
    tree = Tree(team)
    tree.start([("L1", 10)], sub_leaders=1)
    team.wait_for("2 child tasks done", lambda: tree.child_done() >= 2, 60)
    assert tree.child_holder() == "S1" and tree.child_done() < len(CHILDREN)
    first_epoch = team.store.current_epoch(tree.child)
    team.signal("S1", signal.SIGKILL)
    retry = team.wait_event("task.retry", 60, lambda e: e.data.get("task_id") == "sub")
    team.worker("S2", "--sub-leader", sleep="0.1")  # the next attempt's sub-leader

    tasks = tree.settled(90)
    tree.assert_safe(tasks)
    [sub] = [t for t in tasks if t.task_id == "sub"]
    assert (sub.assignee, sub.attempt) == ("S2", 2)
    [prior] = sub.data["history"]
    assert "S1 stopped heartbeating" in prior["failure"]
    events = team.events()
    # the parent waited for a stand-in first (a grace after it saw S1 silent), in vain
    [silent] = of_kind(events, "leader.sub_leader_silent", task_id="sub", assignee="S1")
    # (the grace runs from the round's clock reading, taken just before the event's own)
    assert silent.seq < retry.seq and retry.at - silent.at >= silent.data["grace"] - 0.25
    assert of_kind(events, "leader.sub_leader_changed", task_id="sub") == []
    assert team.store.current_epoch(tree.child) > first_epoch  # S2 adopted the child team


def test_sigkill_of_the_top_leader_while_children_run(team: Team) -> None:
    tree = Tree(team)
    first = tree.start([("L1", 20), ("L2", 10)])
    team.wait_for("2 child tasks done", lambda: tree.child_done() >= 2, 60)
    holder = tree.child_holder()
    child_epoch = team.store.current_epoch(tree.child)
    team.signal("L1", signal.SIGKILL)
    second = team.next_election(first, 30)
    assert second.data.get("leader") == "L2"

    tasks = tree.settled(90)
    tree.assert_safe(tasks)
    # the running child team was not disturbed: same sub-leader, same attempt, same epoch
    assert holder is not None
    only_attempt(tasks, team.events(), holder)
    assert team.store.current_epoch(tree.child) == child_epoch
    assert of_kind(team.events(), "leader.sub_leader_changed", task_id="sub") == []


def test_a_paused_sub_leader_cannot_report_under_its_old_epoch(team: Team) -> None:
    tree = Tree(team)
    first = tree.start([("L1", 20), ("L2", 10)])
    team.wait_for("2 child tasks done", lambda: tree.child_done() >= 2, 60)
    stale = tree.child_holder()
    assert stale in ("S1", "S2")
    survivor = "S2" if stale == "S1" else "S1"
    team.signal(stale, signal.SIGSTOP)
    team.signal("L1", signal.SIGKILL)  # the parent moves to a new epoch meanwhile
    second = team.next_election(first, 30)
    team.wait_for(
        "the survivor to lead the child team", lambda: tree.child_holder() == survivor, 30
    )
    team.signal(stale, signal.SIGCONT)

    tasks = tree.settled(90)
    tree.assert_safe(tasks)
    # the stand-in took the same attempt over inside the child team
    only_attempt(tasks, team.events(), survivor)
    [moved] = of_kind(team.events(), "leader.sub_leader_changed", task_id="sub")
    assert (moved.data["from"], moved.data["to"]) == (stale, survivor)
    assert second.epoch is not None
    def refusals() -> list[Event]:  # not the assignee's; or, before the move, a left epoch
        kinds = ("security.result_refused", "leader.result_refused")
        return [e for k in kinds for e in of_kind(team.events(), k, task_id="sub", sender=stale)]

    refused = team.wait_for("the stale sub-leader's report to be refused", refusals, 20)
    assert all((e.epoch or 0) >= (second.epoch or 0) for e in refused)  # by the new leader
    # nothing the stale sub-leader did after waking was accepted under an old epoch
    assert_no_stale_writes(tree.child_events())
    assert_no_stale_writes(team.events())
