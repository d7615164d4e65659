"""Memory of worker processes, read from /proc (Linux): resident set sizes of whole
process trees, summed, sampled while a benchmark runs.

Two figures: the peak of the summed RSS seen by a sampler every ``interval``
seconds, and the sum of every process's own high-water mark (``VmHWM``), which
misses no short peak but adds up peaks that may not have been simultaneous.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")


def _status_kb(pid: int, field: str) -> int:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return kids
    for task in tasks:
        try:
            kids += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return kids


def tree(pids: Iterable[int]) -> list[int]:
    """The processes ``pids`` and all their descendants."""
    seen: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo += _children(pid)
    return seen


def rss_mb(pids: Iterable[int]) -> float:
    return sum(_status_kb(p, "VmRSS") for p in tree(pids)) / 1024


def hwm_mb(pids: Iterable[int]) -> float:
    return sum(_status_kb(p, "VmHWM") for p in tree(pids)) / 1024


def available() -> bool:
    return (PROC / str(os.getpid()) / "status").exists()


class PeakRSS:
    """Samples the summed RSS of the trees under ``roots()`` on a thread of its own.

    ``roots`` is called on every sample, so processes started after the sampler
    (the workers of the next round) are counted too."""

    def __init__(self, roots: Callable[[], list[int]], interval: float = 0.2) -> None:
        self.roots = roots
        self.interval = interval
        self.peak_mb = 0.0
        self.hwm_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-rss")

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        self._thread.join(timeout=2.0)

    def sample(self) -> None:
        roots = self.roots()
        self.peak_mb = max(self.peak_mb, rss_mb(roots))
        self.hwm_mb = max(self.hwm_mb, hwm_mb(roots))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()
