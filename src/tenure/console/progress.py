"""Progress lines for people, read from the team's event log as it grows.

``tenure worker`` and ``tenure code`` say what is happening while they run (a task
taken, an agent still running, checks, a verdict, a merge) without hooks in the
runtime: a thread of their own follows the store's events, as ``tenure log -f``
does, and turns the ones that matter into a line each. Progress is best-effort: a
store that cannot be read for a moment costs a line of progress, never the run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tenure.protocol.clip import clip, first_line
from tenure.protocol.errors import TenureError
from tenure.store import Event, Store, open_store

ENV_EVERY = "TENURE_PROGRESS_SECONDS"
"""How often a still-running agent is said to be running (seconds, default 15)."""
POLL_SECONDS = 0.2
REASON_WIDTH = 160

Say = Callable[[str], None]


def every_seconds() -> float:
    try:
        value = float(os.environ.get(ENV_EVERY, "") or 15.0)
    except ValueError:
        return 15.0
    return value if value > 0 else 15.0


@contextmanager
def following(
    url: str, team: str, narrate: Callable[[Event], None], tick: Callable[[], None]
) -> Iterator[None]:
    """Follow ``team``'s new events in a thread while the block runs; ``tick`` each poll."""
    stop = threading.Event()
    thread = threading.Thread(
        target=_follow, args=(url, team, narrate, tick, stop), daemon=True, name="progress"
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)


def _follow(
    url: str,
    team: str,
    narrate: Callable[[Event], None],
    tick: Callable[[], None],
    stop: threading.Event,
) -> None:
    try:
        store = open_store(url, create=False)
    except (TenureError, OSError):
        return
    with store:
        last = _start(store, team)
        while not stop.is_set():
            try:
                for event in store.events(team, after=last, limit=500):
                    last = event.seq
                    narrate(event)
                tick()
            except (TenureError, OSError):
                pass  # the member itself rides out the outage and says so
            stop.wait(POLL_SECONDS)
        try:  # what happened in the last moments (the final merge) is said too
            for event in store.events(team, after=last, limit=500):
                narrate(event)
        except (TenureError, OSError):
            pass


def _start(store: Store, team: str) -> int:
    try:
        return int(store.last_event_seq(team))
    except (TenureError, OSError):
        return 0


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 90 else f"{value / 60:.0f}m{value % 60:02.0f}s"


def _attempt(key: object) -> str:
    text = str(key or "")
    return text.rsplit("attempt-", 1)[1] if "attempt-" in text else "?"


class WorkerNarrator:
    """``took t01``, ``done t01 in 2.1s``, ``failed t01 in 0.4s: why``: one member's tasks."""

    def __init__(self, member: str, say: Say):
        self.member, self.say = member, say
        self.started: dict[str, float] = {}

    def __call__(self, event: Event) -> None:
        data = event.data
        task = str(data.get("task_id", ""))
        moved = event.kind == "task.transition"
        if moved and task in self.started and data.get("from") == "running" != data.get("to"):
            self._finished(task, data, event.at)
        elif event.kind == "task.dispatched" and data.get("assignee") == self.member:
            self._took(task, _attempt(data.get("key")), event.at)
        elif moved and self._claimed(task, data):  # queue mode: the worker claims it itself
            self._took(task, str(data.get("attempt", "?")), event.at)

    def _claimed(self, task: str, data: dict[str, Any]) -> bool:
        mine = data.get("assignee") == self.member and data.get("to") == "running"
        return mine and task not in self.started

    def tick(self) -> None:
        """Nothing to say between events: the executor's own output is in its log."""

    def _took(self, task: str, attempt: str, at: float) -> None:
        self.started[task] = at
        self.say(f"took {task} (attempt {attempt})")

    def _finished(self, task: str, data: dict[str, Any], at: float) -> None:
        took = _seconds(at - self.started.pop(task))
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        status = str((result or {}).get("status") or data.get("to"))
        if status == "completed":
            self.say(f"done {task} in {took}")
        elif status in ("cancelled", "queued"):
            self.say(f"stopped {task} after {took} ({status})")
        else:
            why = data.get("reason") or _why(result or {}) or status
            self.say(f"failed {task} in {took}: {clip(first_line(str(why)), REASON_WIDTH)}")


def _why(result: dict[str, Any]) -> str:
    if result.get("question"):
        return f"asks: {result['question']}"
    uncertain = (result.get("notes") or {}).get("uncertain") or []
    if uncertain:
        return str(uncertain[0])
    for item in result.get("evidence") or []:
        if isinstance(item, dict) and (item.get("reason") or item.get("output")):
            return str(item.get("reason") or item.get("output"))
    return str(result.get("status") or "")


class CodingNarrator:
    """A coding run's tasks, one line per step: dispatched, agent running (again every
    ``every`` seconds while it runs), checks running, accepted or rejected, merged."""

    def __init__(self, say: Say, every: float, clock: Callable[[], float] = time.time):
        self.say, self.every, self.clock = say, every, clock
        self.running: dict[str, tuple[float, float]] = {}  # task: (started, last said)

    def __call__(self, event: Event) -> None:
        data, kind = event.data, event.kind
        task = str(data.get("task_id", ""))
        if kind == "code.dispatched":
            self.say(
                f"{task}: dispatched attempt {data.get('attempt')} to {data.get('worker')} "
                f"({data.get('branch')})"
            )
        elif kind == "task.transition" and data.get("to") == "running" != data.get("from"):
            self.running[task] = (event.at, self.clock())
            self.say(f"{task}: agent running")
        elif kind == "task.transition" and data.get("from") == "running" != data.get("to"):
            began = self.running.pop(task, None)
            spent = f" after {_seconds(event.at - began[0])}" if began else ""
            if data.get("to") == "review":
                self.say(f"{task}: agent finished{spent}; checks running")
            else:
                self.say(f"{task}: agent stopped{spent} ({data.get('to')})")
        elif kind in _CODING_STEPS:
            self.say(_CODING_STEPS[kind](task, data))

    def tick(self) -> None:
        now = self.clock()
        for task, (began, said) in list(self.running.items()):
            if now - said >= self.every:
                self.running[task] = (began, now)
                self.say(f"{task}: agent running for {_seconds(now - began)}")


def _reason(data: dict[str, Any]) -> str:
    why = first_line(str(data.get("reason") or ""), REASON_WIDTH, empty="")
    return f": {why}" if why else ""


_CODING_STEPS: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "code.accepted": lambda t, d: f"{t}: accepted (attempt {d.get('attempt')}); merging",
    "code.rejected": lambda t, d: f"{t}: rejected (attempt {d.get('attempt')}){_reason(d)}",
    "code.merged": lambda t, d: f"{t}: merged ({d.get('branch')})",
    "code.conflict": lambda t, d: f"{t}: conflicts with the integration branch{_reason(d)}",
    "code.cancelled": lambda t, d: f"{t}: cancelled{_reason(d)}",
    "code.interrupted": lambda t, d: f"{t}: attempt interrupted{_reason(d)}",
    "code.answered": lambda t, d: f"{t}: answered by the operator; queued again",
    "inbox.added": lambda t, d: f"{t}: needs the operator (tenure inbox){_reason(d)}",
}
