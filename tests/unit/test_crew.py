"""``tenure run``'s crew: a worker that died while running is started again under its
id only once that id is free (a live id is refused), and counts as seen only after its
own join. Real (stand-in) processes, a manual clock."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tenure.console import crew as crew_module
from tenure.console.crew import STARTUP_SECONDS, Crew


@pytest.fixture
def crew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Crew, list[str], list[float]]]:
    def spawn(args: Sequence[str], **_: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sleep", "60"])  # stands in for `tenure worker`

    monkeypatch.setattr(crew_module, "spawn", spawn)
    said: list[str] = []
    now = [0.0]
    made = Crew(tmp_path, "sqlite:///unused.db", say=said.append, clock=lambda: now[0])
    try:
        yield made, said, now
    finally:
        made.stop_all()


def _kill(child: crew_module.Child) -> None:
    child.popen.send_signal(signal.SIGKILL)
    child.popen.wait()


def test_a_restart_waits_for_the_dead_workers_id_to_come_free(
    crew: tuple[Crew, list[str], list[float]],
) -> None:
    made, said, now = crew
    first = made.start("q2", "worker-1", ["worker", "--id", "worker-1"])
    assert made.check(lambda team: {"worker-1"}) is None and first.seen
    now[0] = STARTUP_SECONDS + 5
    _kill(first)
    for _ in range(2):  # its last heartbeat still counts: nothing is started yet
        assert made.check(lambda team: {"worker-1"}) is None  # nor is the run given up
        assert made.children == [] and [c.name for c in made.waiting] == ["worker-1"]
    assert said == [
        f"worker worker-1 exited with code -9 while running: (no log); log: {first.log}; "
        "starting it again (1 of 2) once its id is free (its last heartbeat lapses)"
    ]
    assert made.check(lambda team: set()) is None  # lapsed: started again
    [again] = made.children
    assert said[-1] == "worker worker-1: started again (1 of 2)"
    assert again.restarts == 1 and not again.seen
    made.check(lambda team: set())
    assert not again.seen  # not listed: it has not joined yet
    _kill(again)  # dies before its own join, within its start-up: not started again
    assert made.check(lambda team: set()) == (
        "team q2: no worker is left (every one it started exited)"
    )
    assert "at start-up" in said[-1]
