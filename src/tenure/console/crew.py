"""The member processes ``tenure run`` starts: owned, watched, and never left behind.

Each member writes its output to a log file of its own under the state directory
(``logs/<team>/<member>.log``). A member that dies is noticed at once and said in one
line with its last error line and the log's path. One that had started up (it was seen
a live member of its team, or ran longer than ``STARTUP_SECONDS``) is started again, a
bounded number of times; one that died at start-up is not (the cause would repeat), nor
one that found its store lost (exit status 4). When a team has no worker left the run
stops, exit status 5.

Member ids are exclusive (a live id is refused), so a worker is started again under its
id only once the id is no longer live: a killed process's last heartbeat counts until
its TTL runs out. The wait is said on stderr. A child counts as seen only once its id is
listed live after it started, which its predecessor can no longer cause: its own join.
Every member gets SIGTERM when the run stops, exits or is killed, then SIGKILL after
a grace (``stop_all``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tenure.console.exits import Exit
from tenure.console.member_store import STORE_LOST
from tenure.console.processes import spawn, stop_all
from tenure.protocol.clip import clip
from tenure.protocol.private import private_dir

NO_WORKER_LEFT = Exit.NO_WORKER_LEFT
"""Exit status of ``tenure run`` when a team's every worker died."""
STARTUP_SECONDS = 10.0
"""A member that dies sooner than this after it was started died at start-up."""
MAX_RESTARTS = 2
"""How many times one member is started again after dying while it ran."""


@dataclass
class Child:
    name: str
    team: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes]
    started: float
    restarts: int = 0
    seen: bool = False  # listed once as a live member of its team


@dataclass
class Crew:
    """The members of one run, by team; ``check()`` every round of the run's loop."""

    state_dir: Path
    store_url: str
    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    children: list[Child] = field(default_factory=list)
    gone: list[Child] = field(default_factory=list)
    waiting: list[Child] = field(default_factory=list)
    """Members that died while running, to start again once their id is free."""
    teams: set[str] = field(default_factory=set)

    def start(self, team: str, name: str, args: Sequence[str]) -> Child:
        log = log_path(self.state_dir, team, name)
        popen = spawn(args, log=log, store_url=self.store_url, die_with_parent=True)
        child = Child(name, team, list(args), log, popen, self.clock())
        self.children.append(child)
        self.teams.add(team)
        return child

    def check(self, live: Callable[[str], set[str]] = lambda team: set()) -> str | None:
        """Notice members that died and start again those whose id came free
        (``live(team)``: the team's live member ids); the reason to stop the run when a
        team has no worker left, else None."""
        ids = {team: live(team) for team in self.teams}
        for child in self.children:  # started after its id was free: listed means joined
            child.seen = child.seen or child.name in ids[child.team]
        for child in list(self.children):
            code = child.popen.poll()
            if code is not None:
                self._died(child, code)
        for dead in list(self.waiting):
            if dead.name not in ids[dead.team]:  # its last heartbeat lapsed (or never was)
                self.waiting.remove(dead)
                again = self.start(dead.team, dead.name, dead.args)
                again.restarts = dead.restarts + 1
                self.say(f"worker {dead.name}: started again ({again.restarts} of {MAX_RESTARTS})")
        for team in sorted(self.teams):
            if not any(c.team == team for c in [*self.children, *self.waiting]):
                return f"team {team}: no worker is left (every one it started exited)"
        return None

    def _died(self, child: Child, code: int) -> None:
        early = not child.seen and self.clock() - child.started < STARTUP_SECONDS
        when = "at start-up" if early else "while running"
        line = (
            f"worker {child.name} exited with code {code} {when}: "
            f"{last_error_line(child.log)}; log: {child.log}"
        )
        self.children.remove(child)
        if early or code == STORE_LOST or child.restarts >= MAX_RESTARTS:
            self.gone.append(child)
            self.say(line)
            return
        self.say(
            f"{line}; starting it again ({child.restarts + 1} of {MAX_RESTARTS}) once its "
            "id is free (its last heartbeat lapses)"
        )
        self.waiting.append(child)

    def stop_all(self) -> None:
        stop_all([c.popen for c in self.children])
        self.children.clear()
        self.waiting.clear()


def log_path(state_dir: Path, team: str, member: str) -> Path:
    """``STATE_DIR/logs/<team path>/<member>.log``, its directories owner-only."""
    folder = state_dir / "logs" / Path(*team.split("/"))
    private_dir(folder)
    return folder / f"{member}.log"


def last_error_line(log: Path, *, tail_bytes: int = 16_384) -> str:
    """The log's last line that says ``error``, else its last line; never a traceback's
    frame lines (the exception line closes a traceback)."""
    try:
        with open(log, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - tail_bytes))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(it printed nothing)"
    errors = [line for line in lines if "error" in line.lower()]
    return clip((errors or lines)[-1], 300)
