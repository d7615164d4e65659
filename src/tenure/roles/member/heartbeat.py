"""Membership liveness in a background thread; rejoins when the store forgot us.

Each heartbeat carries this process's incarnation token, made once when it is
built, so the store tells our own renewals from another process's under the same
id: a join while the id is live elsewhere is refused (``MemberIdTaken``), and
a member whose id was taken over after its own heartbeat lapsed learns it on its
next beat and stops (``lost``) instead of working on beside the new holder.

Each join and heartbeat also says how many slots the member has and how many of
them are free (``free``, read at each beat), for the leader and for people.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

from tenure.coord import EpochMemory
from tenure.protocol import TenureError
from tenure.protocol.errors import MemberIdTaken, NotFound
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
        on_lapse: Callable[[], None] | None = None,
        on_lost: Callable[[], None] | None = None,
        slots: int = 1,
        free: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.team = team
        self.member_id = member_id
        self.ttl = ttl
        self.priority = priority
        self.capabilities = capabilities
        self.memory = memory
        self.on_lapse = on_lapse
        """Called after a rejoin: our heartbeat had lapsed, so what we held (a message,
        an effect claim) may be another member's by now."""
        self.on_lost = on_lost
        """Called once the id is another process's: stop the work in hand."""
        self.slots = slots
        self.free = free or (lambda: slots)
        self.incarnation = secrets.token_hex(8)
        self.lost = threading.Event()
        self.taken: MemberIdTaken | None = None
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
            incarnation=self.incarnation,
            slots=self.slots,
            free_slots=self.free(),
        )

    def beat(self) -> None:
        try:
            self.store.heartbeat(
                self.team,
                self.member_id,
                ttl=self.ttl,
                highest_epoch=self.memory.highest,
                incarnation=self.incarnation,
                free_slots=self.free(),
            )
        except NotFound:
            self.join()  # expired, or the store lost its state: report our epoch again
            if self.on_lapse is not None:
                self.on_lapse()

    def start(self, on_beat: Callable[[], None] | None = None) -> None:
        """Join (``MemberIdTaken`` if the id is live in another process), then beat."""
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
        if leave and not self.lost.is_set():  # never remove the id's new holder
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
            except MemberIdTaken as exc:
                self.taken = exc
                self.lost.set()
                if self.on_lost is not None:
                    self.on_lost()
                return
            except TenureError:
                continue  # store unreachable: try again next beat
