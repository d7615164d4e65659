"""The member behind a worker-role server: a follower whose executor is the bridge,
running in a thread beside the server for as long as it serves.

Once the bound task is settled (done or cancelled) the member leaves the team,
so no other work is sent to it; the server goes on answering ``read_task``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tenure.protocol import TenureError
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.member.bridge import Bridge
from tenure.store import TERMINAL_STATES, Store

WATCH_EVERY = 0.2


@contextmanager
def member_running(store: Store, config: FollowerConfig, bridge: Bridge) -> Iterator[Follower]:
    """Run the follower (and the watch that ends it) until the block exits."""
    stop, settled = threading.Event(), threading.Event()
    follower = Follower(store, config, bridge)
    failure: list[BaseException] = []

    def work() -> None:
        try:
            follower.run(stop)
        except BaseException as exc:  # noqa: BLE001 - said by the caller, after the server
            failure.append(exc)
            bridge.halt(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return
        if not settled.is_set():  # stopped for a reason of its own: the store was lost
            bridge.halt("the member left the team (see the server's stderr)")

    worker = threading.Thread(target=work, name="tenure-mcp-member", daemon=True)
    watch = threading.Thread(
        target=_leave_when_settled, args=(store, bridge, stop, settled), daemon=True
    )
    worker.start()
    watch.start()
    try:
        yield follower
    finally:
        settled.set()  # the server ends: the member leaves, no halt to report
        stop.set()
        bridge.close()
        worker.join(timeout=config.member_ttl + 2)
    if failure:
        raise failure[0]


def _leave_when_settled(
    store: Store, bridge: Bridge, stop: threading.Event, settled: threading.Event
) -> None:
    while not stop.wait(WATCH_EVERY):
        task_id = bridge.task_id
        if task_id is None or bridge.in_hand is not None:
            continue
        try:
            state = store.get_task(bridge.team, task_id).state
        except TenureError:
            continue
        if state in TERMINAL_STATES:
            settled.set()
            stop.set()
