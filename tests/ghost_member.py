"""A member that only pretends: it takes a composite task's envelope and marks the
attempt running, then the test stops it (no heartbeats, no renewals) to play a
sub-leader that died mid-attempt. Shared by the nested-team tests."""

from __future__ import annotations

import threading
import time

from tenure.protocol import TaskEnvelope
from tenure.store import Store


def ghost_takes_attempt(
    store: Store,
    team: str,
    task_id: str,
    member: str = "ghost",
    *,
    alive: threading.Thread | None = None,
    seconds: float = 30.0,
) -> TaskEnvelope:
    """Heartbeat as ``member`` until its envelope for ``task_id`` arrives (while
    ``alive`` runs), then mark the attempt running under the envelope's epoch."""
    deadline = time.monotonic() + seconds
    deliveries = []
    while not deliveries and time.monotonic() < deadline and (alive is None or alive.is_alive()):
        store.heartbeat(team, member, ttl=1.0)
        deliveries = store.receive(team, f"member:{member}", consumer=member, visibility_timeout=60)
        time.sleep(0.05)
    assert deliveries, f"{member} was never sent {task_id}"
    [delivery] = deliveries
    envelope = TaskEnvelope.model_validate(delivery.payload["body"])
    assert envelope.task_id == task_id
    task = store.get_task(team, task_id)
    store.transition(
        team, task_id, epoch=envelope.epoch, expect=["queued"], to="running", version=task.version
    )
    return envelope
