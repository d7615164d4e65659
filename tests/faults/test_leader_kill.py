"""SIGKILL of the leader mid-plan: the next candidate by priority takes over and finishes."""

from __future__ import annotations

import signal

import pytest

from .harness import Team, assert_run_safe, failover_bound, of_kind

pytestmark = pytest.mark.slow


def test_sigkill_of_the_leader_mid_plan(team: Team) -> None:
    team.write_plan(15)
    first = team.start([("L1", 30), ("L2", 20), ("L3", 10)], workers=3)
    team.wait_for("3 tasks done under L1", lambda: team.done_count() >= 3, 30)
    assert team.done_count() < 15, "the plan finished before the leader could be killed"

    killed_at = team.signal("L1", signal.SIGKILL)
    bound = failover_bound(rank=1)  # L1 may still be listed live, so L2 is rank 1
    second = team.next_election(first, bound + 10)
    failover = second.at - killed_at
    print(f"failover {failover:.2f}s (bound {bound:.2f}s), epoch {first.epoch} -> {second.epoch}")
    assert second.data.get("leader") == "L2", "the highest-priority survivor leads"
    assert failover <= bound

    tasks = team.wait_settled(60)
    assert_run_safe(team, tasks)
    accepted_after = [
        e for e in of_kind(team.events(), "task.transition", to="done") if e.seq > second.seq
    ]
    assert accepted_after, "the new leader finished part of the plan"
