"""Every message delivered twice (envelopes and results): every effect still exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from .harness import Team, assert_run_safe, of_kind

pytestmark = pytest.mark.slow


def test_duplicate_delivery_of_every_message(team: Team) -> None:
    team.write_plan(12)
    team.start(
        [("L1", 30), ("L2", 20)],
        workers=3,
        leader_flags=("--duplicate-assignments",),
        worker_flags=("--duplicate-results",),
        sleep="0.1-0.3",
    )

    tasks = team.wait_settled(60)
    assert_run_safe(team, tasks)
    events = team.events()
    # each attempt ran at most once: its idempotency key was claimed once
    attempts = Counter(
        e.data["key"] for e in of_kind(events, "effect.claimed") if ":attempt-" in e.data["key"]
    )
    assert attempts and max(attempts.values()) == 1, attempts

    # every task's second envelope reaches its worker and is answered from the record
    def absorbed_by_workers() -> int:
        n = len(of_kind(team.events(), "follower.duplicate_absorbed"))
        return n if n >= len(tasks) else 0

    follower_absorbed = team.wait_for("every second envelope absorbed", absorbed_by_workers, 10)
    leader_absorbed = len(of_kind(events, "leader.duplicate_absorbed"))
    print(
        f"absorbed: {follower_absorbed} envelopes by workers, {leader_absorbed} results by leaders"
    )
    assert leader_absorbed >= 1
