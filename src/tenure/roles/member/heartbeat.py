"""Membership liveness in a background thread; rejoins when the store forgot us."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tenure.coord import EpochMemory
from tenure.protocol import TenureError
from tenure.protocol.errors import NotFound
from tenure.store import Store


class MemberHeartbeat:
    def __init__(
        self,
        store: Store,
        team: str,
        member_id: str,
        *,
        ttl: float,
        priority: int,
        capabilities: tuple[str, ...],
        memory: EpochMemory,
    ) -> None:
        self.store = store
        self.team = team
        self.member_id = member_id
        self.ttl = ttl
        self.priority = priority
        self.capabilities = capabilities
        self.memory = memory
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def join(self) -> None:
        self.store.join(
            self.team,
            self.member_id,
            ttl=self.ttl,
            priority=self.priority,
            capabilities=self.capabilities,
            highest_epoch=self.memory.highest,
        )

    def beat(self) -> None:
        try:
            self.store.heartbeat(
                self.team, self.member_id, ttl=self.ttl, highest_epoch=self.memory.highest
            )
        except NotFound:
            self.join()  # expired, or the store lost its state: report our epoch again

    def start(self, on_beat: Callable[[], None] | None = None) -> None:
        self.join()
        self._thread = threading.Thread(
            target=self._run,
            args=(on_beat,),
            daemon=True,
            name=f"tenure-heartbeat-{self.member_id}",
        )
        self._thread.start()

    def stop(self, *, leave: bool) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ttl)
        if leave:
            try:
                self.store.leave(self.team, self.member_id)
            except TenureError:
                pass  # membership expires by itself

    def _run(self, on_beat: Callable[[], None] | None) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.beat()
                if on_beat is not None:
                    on_beat()
            except TenureError:
                continue  # store unreachable: try again next beat
