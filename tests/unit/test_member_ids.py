"""A member process and its id: refused while the id is another's, stopped when the id
is taken from it, waiting for the id when it runs inside a team of one process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tenure.executors import resolve_executor
from tenure.protocol.errors import MemberIdTaken
from tenure.roles import Follower, FollowerConfig
from tenure.store import Store

TEAM = "unit-member-ids"


def _until(what: str, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _follower(store: Store, **config: object) -> Follower:
    settings = FollowerConfig(team=TEAM, member_id="w1", member_ttl=0.6, **config)  # type: ignore[arg-type]
    return Follower(store, settings, resolve_executor("noop"))


def test_a_follower_under_a_live_id_refuses_to_start(store: Store) -> None:
    store.join(TEAM, "w1", ttl=30.0, incarnation="another-process")
    with pytest.raises(MemberIdTaken, match="member id w1 is live in team"):
        _follower(store).run(threading.Event())
    [member] = store.members(TEAM)
    assert member.incarnation == "another-process"  # left as it was


def test_a_follower_whose_id_was_taken_stops_and_leaves_the_new_holder_alone(
    store: Store,
) -> None:
    follower = _follower(store)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            follower.run(threading.Event())
        except MemberIdTaken as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        _until("the follower to join", lambda: bool(store.members(TEAM)))
        store.leave(TEAM, "w1")  # as if its heartbeat had lapsed ...
        store.join(TEAM, "w1", ttl=30.0, incarnation="impostor")  # ... and another took it
        thread.join(timeout=10)
    finally:
        if thread.is_alive():
            follower.heartbeat.stop(leave=False)
    assert not thread.is_alive() and failure
    [member] = store.members(TEAM)
    assert member.incarnation == "impostor"


def test_a_follower_inside_one_process_waits_for_its_id(store: Store) -> None:
    store.join(TEAM, "w1", ttl=0.5, incarnation="a-crashed-run")
    stop = threading.Event()
    follower = _follower(store, await_id=True)
    thread = threading.Thread(target=follower.run, args=(stop,))
    thread.start()
    try:
        mine = follower.heartbeat.incarnation
        _until("the id to be free", lambda: any(m.incarnation == mine for m in store.members(TEAM)))
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
