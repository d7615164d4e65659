"""Three worker processes started under one ``--id``: the store lets one of them be
that member; the others exit non-zero with one line, and every effect runs once."""

from __future__ import annotations

import signal

import pytest

from tenure.coord import Credentials
from tenure.coord.credentials import init_team
from tenure.protocol import load_plan
from tenure.roles import enqueue_plan

from .harness import WORKER_TTL, Team, assert_run_safe

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["team", "queue"])
def test_three_workers_under_one_id_only_one_runs(team: Team, mode: str) -> None:
    team.write_plan(6)
    flags = ("--queue",) if mode == "queue" else ()
    started = [
        team.worker(f"w1-{n}", *flags, member_id="w1", may_fail=True) for n in (1, 2, 3)
    ]

    def refused() -> list[int] | None:
        codes = [m.popen.poll() for m in started]
        return codes if sum(code is not None for code in codes) == 2 else None

    codes = team.wait_for("two of the three to be refused", refused, 30)
    [live] = [m for m, code in zip(started, codes, strict=True) if code is None]
    for member, code in zip(started, codes, strict=True):
        if member is live:
            continue
        text = member.log.read_text(encoding="utf-8")
        assert code == 1, text
        assert f"error: member id w1 is live in team {team.name} (last heartbeat " in text
        assert "choose another --member or wait" in text
        assert "Traceback" not in text
    assert team.live_members() == {"w1"}

    if mode == "queue":
        init_team(team.keys, team.name)
        lead = Credentials.load(team.keys, team.name, "leader", "lead")
        enqueue_plan(team.store, load_plan(team.plan_path), credentials=lead)
    else:
        team.leader("L1", 30)
    tasks = team.wait_settled(60)
    ledger = assert_run_safe(team, tasks)
    assert {line["pid"] for line in ledger.lines} == {live.pid}
    assert live.popen.poll() is None  # the one that holds the id keeps working


def test_a_restart_under_the_id_waits_for_the_old_heartbeat_to_lapse(team: Team) -> None:
    team.write_plan(1)
    first = team.worker("first", member_id="w1")
    team.wait_for("w1 to join", lambda: "w1" in team.live_members(), 30)
    killed_at = team.signal("first", signal.SIGKILL)

    def joins() -> int:
        return sum(e.kind == "member.joined" for e in team.events())

    def restarted() -> bool:
        """Start one more process under w1: True once one joined, False if refused."""
        member = team.worker(f"again-{len(team.members)}", member_id="w1", may_fail=True)
        before = joins()
        settled = team.wait_for(
            "the restart to join or be refused",
            lambda: "refused" if member.popen.poll() is not None else joins() > before,
            30,
        )
        if settled == "refused":
            text = member.log.read_text(encoding="utf-8")
            assert member.popen.returncode == 1 and "member id w1 is live" in text, text
            return False
        return True

    team.wait_for("a restart under w1 to be admitted", restarted, 30)
    admitted = team.store.members(team.name)[0]
    assert admitted.member_id == "w1"
    # admitted once the killed process's membership lapsed, not before
    assert admitted.joined_at - killed_at >= WORKER_TTL * 0.5
    assert first.popen.poll() == -signal.SIGKILL
