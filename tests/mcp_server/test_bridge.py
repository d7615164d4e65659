"""The bridge between a follower and an MCP agent, in one process on each real store:
a leader and the bridged member in threads, the agent's calls made directly.

What it must hold: an envelope of another task never reaches the agent (its attempt
fails, saying why), the agent can set no id, key or epoch of its result, and an agent
that goes away gives its attempt back at once rather than at the deadline."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tenure import Leader, LeaderConfig, LeaseTiming, Plan, Store
from tenure.console.mcp.member import member_running
from tenure.protocol.errors import ConfigError, MemberIdTaken, NotFound, ProtocolError
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.member.bridge import Bridge, OutOfScope

from .team import until

TEAM = "bridge-team"
pytestmark = pytest.mark.timeout(30)


def two_tasks() -> Plan:
    return Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [
                {"id": "other", "goal": "not the agent's", "max_attempts": 1},
                {"id": "mine", "goal": "the agent's", "acceptance_criteria": ["it is done"]},
            ],
        }
    )


def state(store: Store, task_id: str) -> str | None:
    try:
        return store.get_task(TEAM, task_id).state
    except NotFound:
        return None  # not registered yet


@contextmanager
def bridged(store: Store, tmp_path: Path, task: str | None) -> Iterator[Bridge]:
    """A leader of ``two_tasks`` and one member, bridged, bound to ``task``."""
    stop = threading.Event()
    bridge = Bridge(store, TEAM, "agent-1", task)
    member = FollowerConfig(
        team=TEAM, member_id="agent-1", state_dir=tmp_path, poll_interval=0.01, member_ttl=1.0
    )
    lead = LeaderConfig(
        team=TEAM, member_id="lead", timing=LeaseTiming(ttl=2.0), elect=False,
        poll_interval=0.01, state_dir=tmp_path, exit_when_done=False,
    )  # fmt: skip
    threads = [
        threading.Thread(target=Follower(store, member, bridge).run, args=(stop,), daemon=True),
        threading.Thread(target=Leader(store, lead, two_tasks()).run, args=(stop,), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield bridge
    finally:
        stop.set()
        bridge.close()
        for thread in threads:
            thread.join(timeout=10)


def test_another_tasks_envelope_fails_unseen_and_the_bound_task_is_served(
    store: Store, tmp_path: Path
) -> None:
    with bridged(store, tmp_path, "mine") as bridge:
        assert until(lambda: state(store, "other") == "blocked", 15)
        other = store.get_task(TEAM, "other")
        assert "serves only task 'mine'" in str(other.data)
        with pytest.raises(OutOfScope, match="'other' is not in its scope"):
            bridge.view("other")
        assert bridge.wait_assigned(10)
        assert until(lambda: bridge.view()["in_hand"], 10)
        view = bridge.view("mine")
        assert (view["task_id"], view["goal"], view["status"]) == ("mine", "the agent's", "working")

        with pytest.raises(ProtocolError, match="epoch: one of status"):
            bridge.submit(None, {"status": "completed", "epoch": 99})
        with pytest.raises(ProtocolError, match="criteria: all 1 acceptance criteria restated"):
            bridge.progress(None, "half way", ["it is done", "and more"], 0.5)
        said = bridge.progress(None, "started", None, 0.1)  # no restatement: still recorded
        assert said["acceptance_criteria"] == ["it is done"]  # the reply restates them
        bridge.progress(None, "half way", ["it will be done"], 0.5)
        bridge.submit(None, {"status": "completed", "artifact": {"ok": True}})
        assert until(lambda: store.get_task(TEAM, "mine").state == "done", 10)
        assert bridge.view()["status"] == "completed"
    restated = [e.data["restated"] for e in store.events(TEAM) if e.kind == "mcp.progress"]
    assert restated == [[], ["it will be done"]]
    checkins = [e.data["message"] for e in store.events(TEAM) if e.kind == "task.progress"]
    assert checkins == ["started", "half way"]  # both sent, signed, before the result


def test_an_agent_that_goes_away_gives_its_attempt_back_at_once(
    store: Store, tmp_path: Path
) -> None:
    with bridged(store, tmp_path, "mine") as bridge:
        assert until(lambda: bridge.in_hand is not None, 15)
        bridge.close()  # what the server does when its agent hangs up
        assert until(lambda: store.get_task(TEAM, "mine").attempt >= 2, 10)
    history = str(store.get_task(TEAM, "mine").data)
    assert "stopped before it answered" in history


def test_a_member_whose_id_is_taken_says_so_on_every_call(store: Store, tmp_path: Path) -> None:
    stop = threading.Event()
    config = FollowerConfig(team=TEAM, member_id="agent-1", state_dir=tmp_path, member_ttl=5.0)
    holder = Follower(store, config, Bridge(store, TEAM, "agent-1"))
    thread = threading.Thread(target=holder.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert until(lambda: any(m.member_id == "agent-1" for m in store.members(TEAM)), 10)
        second = Bridge(store, TEAM, "agent-1", "mine")
        with pytest.raises(MemberIdTaken), member_running(store, config, second):
            assert until(lambda: second.halted, 10)
            assert not second.wait_assigned(5)  # at once: nothing will come
            with pytest.raises(ConfigError, match="stopped serving: .*agent-1"):
                second.view()
    finally:
        stop.set()
        thread.join(timeout=10)
