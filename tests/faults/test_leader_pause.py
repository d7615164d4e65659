"""SIGSTOP of the leader past its TTL, then SIGCONT: nothing it does after waking is obeyed."""

from __future__ import annotations

import signal
import time

import pytest

from .harness import FENCED_KINDS, LEADER_TTL, Team, assert_run_safe, failover_bound, of_kind

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("wake", ["mid-plan", "after-finish"])
def test_paused_leader_is_not_obeyed_after_resuming(team: Team, wake: str) -> None:
    team.write_plan(15)
    first = team.start([("L1", 30), ("L2", 20)], workers=3)
    team.wait_for("3 tasks done under L1", lambda: team.done_count() >= 3, 30)
    assert team.done_count() < 15, "the plan finished before the leader could be paused"

    paused_at = team.signal("L1", signal.SIGSTOP)
    bound = failover_bound(rank=1)
    second = team.next_election(first, bound + 10)
    failover = second.at - paused_at
    assert second.data.get("leader") == "L2" and failover <= bound, (second, failover, bound)
    granted = team.grant_of(second)
    if wake == "after-finish":  # L2 finishes the plan and leaves while L1 sleeps
        team.wait_event("leader.plan_settled", 60, lambda e: e.data.get("leader") == "L2")
    time.sleep(max(0.0, paused_at + LEADER_TTL + 0.5 - time.time()))  # well past L1's TTL
    resumed_at = team.signal("L1", signal.SIGCONT)

    tasks = team.wait_settled(60)
    woke = team.wait_event(
        "leader.stepped_down", 10, lambda e: e.data.get("leader") == "L1" and e.seq > granted.seq
    )
    ledger = assert_run_safe(team, tasks)  # also: a finish is announced only by the holder
    events = team.events()
    # Nothing at L1's epoch was accepted once L2's epoch was granted ...
    late = [
        e
        for e in events
        if e.seq > granted.seq and e.kind in FENCED_KINDS and e.epoch == first.epoch
    ]
    assert late == [], f"writes at the paused leader's epoch after the new grant: {late}"
    # ... and no assignment of L1's was executed after it woke up.
    after_wake = [x for x in ledger.lines if x["epoch"] == first.epoch and x["time"] >= resumed_at]
    assert after_wake == [], f"effects of the paused leader after SIGCONT: {after_wake}"

    refused = {
        k: len(of_kind(events, k)) for k in ("follower.fenced", "follower.stale_envelope_ignored")
    }
    print(
        f"failover {failover:.2f}s (bound {bound:.2f}s); L1 paused {resumed_at - paused_at:.2f}s,"
        f" stepped down {woke.at - resumed_at:.2f}s after waking ({woke.data.get('reason')});"
        f" refusals seen by workers: {refused}"
    )


def test_work_in_flight_under_a_paused_leader_is_fenced(team: Team) -> None:
    """Attempts L1 dispatched are still running when L2's epoch is granted: their effects,
    tried under L1's epoch after the grant, are refused by the store and redone under L2's."""
    team.write_plan(3)
    slow = failover_bound(rank=1) + 1.0  # each first attempt outlasts the takeover
    first = team.start([("L1", 30), ("L2", 20)], workers=3, sleep=f"{slow}", retry_sleep="0.3")
    team.wait_for("3 attempts in flight", lambda: len(team.started()) >= 3, 30)
    paused_at = team.signal("L1", signal.SIGSTOP)
    second = team.next_election(first, failover_bound(rank=1) + 10)
    granted = team.grant_of(second)
    assert second.data.get("leader") == "L2" and second.at - paused_at <= failover_bound(rank=1)
    assert team.ledger().lines == [], "an in-flight attempt finished before the takeover"
    team.signal("L1", signal.SIGCONT)

    tasks = team.wait_settled(60)
    ledger = assert_run_safe(team, tasks)
    assert {x["epoch"] for x in ledger.lines} == {second.epoch}, ledger.lines
    assert all(t.attempt >= 2 for t in tasks), [(t.task_id, t.attempt) for t in tasks]
    refused = [e for e in of_kind(team.events(), "task.retry") if "StaleEpoch" in e.data["why"]]
    assert len(refused) == 3 and all(e.seq > granted.seq for e in refused), refused
