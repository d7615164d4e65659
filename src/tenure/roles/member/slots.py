"""Slots: up to N attempts of one member at once, each with its own cancellation.

Why threads: executors are synchronous (a function, a subprocess, an SDK call), and
what an attempt waits on — a model's reply over HTTP, a command's exit — releases the
GIL, so N slots keep N calls in flight in one process. A member with one slot runs its
attempt on its own loop's thread, as it always did: there is nothing to overlap.

Three small pieces: ``Slots`` (how many are free; run work in one), ``InHand`` (the
attempts being executed, each with its own ``cancelled`` event, so a cancel or a
deadline stops one attempt and a lost heartbeat stops them all) and ``KeyGate`` (one
slot at a time per idempotency key: a redelivered or resent envelope waits for the
slot already running it, then is absorbed as a replay).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tenure.protocol import ConfigError, TaskEnvelope
from tenure.protocol.limits import MAX_SLOTS

__all__ = ["InHand", "KeyGate", "Slots", "check_concurrency", "cancelled_on"]

STOP_POLL = 0.1
"""Seconds between two looks at a member's ``stop`` while it works (``cancelled_on``)."""


def check_concurrency(value: object, field_name: str = "concurrency") -> int:
    """How many attempts a member runs at once: a whole number from 1 to ``MAX_SLOTS``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOTS:
        raise ConfigError(f"{field_name}: a whole number from 1 to {MAX_SLOTS}, got {value!r}")
    return value


class Slots:
    """``size`` slots; ``start(work)`` runs ``work`` in a free one. With one slot it
    runs on the caller's thread; with more, on a thread of its own. A failure a slot's
    work raised (a store lost, say) is raised again by ``check()`` on the loop."""

    def __init__(self, size: int, name: str) -> None:
        self.size = check_concurrency(size)
        self.name = name
        self._busy = 0
        self._changed = threading.Condition()
        self._failure: BaseException | None = None

    @property
    def free(self) -> int:
        with self._changed:
            return self.size - self._busy

    def start(self, work: Callable[[], None]) -> None:
        """Run ``work`` in a slot; the caller took no more than ``free`` to start."""
        with self._changed:
            if self._busy >= self.size:
                raise RuntimeError("no free slot")  # a caller's bug: it counts free first
            self._busy += 1
        if self.size == 1:
            try:
                work()
            finally:
                self._release()
            return
        thread = threading.Thread(target=self._run, args=(work,), daemon=True, name=self.name)
        thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - handed to the loop by check()
            with self._changed:
                self._failure = self._failure or exc
        finally:
            self._release()

    def _release(self) -> None:
        with self._changed:
            self._busy -= 1
            self._changed.notify_all()

    def wait_free(self, timeout: float) -> bool:
        """Wait until a slot is free (at most ``timeout`` seconds); True if one is."""
        with self._changed:
            return self._changed.wait_for(lambda: self._busy < self.size, timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every slot is free; True if they are."""
        with self._changed:
            return self._changed.wait_for(lambda: self._busy == 0, timeout)

    def check(self) -> None:
        """Raise what a slot's work raised, once."""
        with self._changed:
            failure, self._failure = self._failure, None
        if failure is not None:
            raise failure


@dataclass
class _Held:
    envelope: TaskEnvelope
    cancelled: threading.Event = field(default_factory=threading.Event)


class InHand:
    """The attempts a member is executing, by idempotency key, each with its own
    ``cancelled`` event (the executor's ``ctx.cancelled``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}

    @contextmanager
    def holding(self, envelope: TaskEnvelope, cancelled: threading.Event) -> Iterator[None]:
        """Count ``envelope`` in hand while its executor runs."""
        key = envelope.idempotency_key
        with self._lock:
            self._held[key] = _Held(envelope, cancelled)
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(key, None)

    def envelopes(self) -> list[TaskEnvelope]:
        with self._lock:
            return [held.envelope for held in self._held.values()]

    def cancel(self, key: str) -> None:
        with self._lock:
            held = self._held.get(key)
        if held is not None:
            held.cancelled.set()

    def cancel_all(self) -> None:
        """Cancel every attempt in hand."""
        with self._lock:
            held = list(self._held.values())
        for each in held:
            each.cancelled.set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


class KeyGate:
    """One slot at a time per idempotency key, in this process: the store's effect
    claim lets the same holder run its own key again (a restarted member resumes its
    work), so two slots of one member must not both hold it."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._keys: set[str] = set()

    @contextmanager
    def only(self, key: str) -> Iterator[None]:
        with self._lock:
            self._lock.wait_for(lambda: key not in self._keys)
            self._keys.add(key)
        try:
            yield
        finally:
            with self._lock:
                self._keys.discard(key)
                self._lock.notify_all()


@contextmanager
def cancelled_on(stop: threading.Event, cancel: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``cancel()`` once ``stop`` is set: from a thread of its own,
    since the block's thread may itself be inside an executor (a member with one slot
    runs its attempt on its loop's thread), where it would notice ``stop`` only after."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(STOP_POLL):
                cancel()
                return

    watcher = threading.Thread(target=watch, daemon=True, name="tenure-stop-watch")
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
