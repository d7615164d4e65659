"""Helpers shared by the benchmark scripts in ``bench/``.

Benchmarks are scripts run by hand (``.venv/bin/python bench/NAME.py``), never
timed tests: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tenure
from tenure.console.processes import spawn
from tenure.protocol import new_id
from tenure.store import Event, Store
from tenure.store.url import sqlite_path

REDIS_SCHEMES = ("redis", "rediss", "unix")
ROOT = Path(__file__).resolve().parent.parent


# --- where each run keeps its state ------------------------------------------------------


def is_redis(url: str | None) -> bool:
    return url is not None and url.split("://", 1)[0] in REDIS_SCHEMES


@dataclass
class Stores:
    """Hands out a fresh store for each run (cell) of a benchmark.

    ``prefix`` None: a new SQLite file in the run's own temporary directory.
    ``prefix`` a directory or ``sqlite:///DIR``: a new SQLite file ``DIR/LABEL.db``.
    ``prefix`` a Redis URL: that database, used as-is; each run gets a team of its
    own, and ``flush`` empties the database before each run (only for a database
    you own: it deletes everything in it).
    """

    prefix: str | None = None
    flush: bool = False

    def __post_init__(self) -> None:
        if self.flush and not is_redis(self.prefix):
            raise SystemExit("--flush only applies to a redis:// --store you own")

    @property
    def kind(self) -> str:
        return "redis" if is_redis(self.prefix) else "sqlite"

    def url_for(self, run_dir: Path, label: str) -> str:
        if is_redis(self.prefix):
            assert self.prefix is not None
            if self.flush:
                _flush_redis(self.prefix)
            return self.prefix
        if self.prefix is None:
            path = run_dir / "state.db"
        else:
            base = (
                sqlite_path(self.prefix) if self.prefix.startswith("sqlite:") else Path(self.prefix)
            )
            base.mkdir(parents=True, exist_ok=True)
            path = base / f"{label}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path.resolve()}"


def _flush_redis(url: str) -> None:
    import redis  # the "redis" extra; only needed for --flush

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def unique_team(kind: str) -> str:
    """A team path no earlier run used (so a shared Redis database needs no flush)."""
    return f"bench-{kind}-{new_id()[-8:].lower()}"


class RunDir:
    """A temporary directory for one run: logs, plan, member state; removed unless kept."""

    def __init__(self, root: Path, label: str) -> None:
        self.path = root / label
        shutil.rmtree(self.path, ignore_errors=True)
        (self.path / "logs").mkdir(parents=True)
        self.state = self.path / "members"

    def log(self, name: str) -> Path:
        return self.path / "logs" / f"{name}.log"

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def bench_root(keep: Path | None) -> Path:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return keep.resolve()
    return Path(tempfile.mkdtemp(prefix="tenure-bench-"))


# --- member processes --------------------------------------------------------------------


def spawn_member(args: Sequence[str], log: Path, url: str) -> subprocess.Popen[bytes]:
    """``python -m tenure ARGS`` in its own session, output to ``log``, with the store
    URL in its TENURE_STORE (never on the command line)."""
    return spawn(list(args), log=log, store_url=url)


# --- reading the event log ---------------------------------------------------------------


class EventTail:
    """Follows one team's event log from the start, page by page."""

    def __init__(self, store: Store, team: str) -> None:
        self.store = store
        self.team = team
        self.seen: list[Event] = []
        self._after = 0

    def poll(self) -> list[Event]:
        new: list[Event] = []
        while True:
            page = self.store.events(self.team, after=self._after, limit=1000)
            new.extend(page)
            if page:
                self._after = page[-1].seq
            if len(page) < 1000:
                break
        self.seen.extend(new)
        return new

    def first(self, match: Callable[[Event], bool]) -> Event | None:
        return next((e for e in self.seen if match(e)), None)

    def count(self, match: Callable[[Event], bool]) -> int:
        return sum(1 for e in self.seen if match(e))

    def poll_first(self, match: Callable[[Event], bool]) -> Event | None:
        self.poll()
        return self.first(match)

    def poll_count(self, match: Callable[[Event], bool]) -> int:
        self.poll()
        return self.count(match)


def all_events(store: Store, team: str) -> list[Event]:
    tail = EventTail(store, team)
    tail.poll()
    return tail.seen


def wait_for(
    what: str,
    check: Callable[[], Any],
    *,
    timeout: float,
    interval: float = 0.02,
    procs: Mapping[str, subprocess.Popen[bytes]] | None = None,
) -> Any:
    """Poll ``check`` until it returns something truthy; ``TimeoutError`` after ``timeout``,
    ``RuntimeError`` at once if one of ``procs`` has exited."""
    deadline = time.monotonic() + timeout
    while True:
        if procs:
            check_alive(procs)
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def check_alive(procs: Mapping[str, subprocess.Popen[bytes]]) -> None:
    for name, proc in procs.items():
        code = proc.poll()
        if code is not None:
            raise RuntimeError(f"{name} exited early with status {code} (see its log)")


def is_transition(event: Event, to: str) -> bool:
    return event.kind == "task.transition" and event.data.get("to") == to


# --- figures -----------------------------------------------------------------------------


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@dataclass
class Machine:
    nproc: int
    cpu_model: str
    python: str
    platform: str
    commit: str
    tenure_src: str
    loadavg_at_start: tuple[float, float, float]
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        load = ", ".join(f"{x:.2f}" for x in self.loadavg_at_start)
        return (
            f"{self.nproc} CPU ({self.cpu_model}), Python {self.python}, {self.platform}, "
            f"tenure {self.commit} from {self.tenure_src}, load average at start {load}"
        )


def _shown(path: Path) -> str:
    """A path as a result file records it: relative to this checkout when inside it
    (results are committed, and a machine's own paths say nothing to a reader)."""
    try:
        return str(path.relative_to(ROOT)) or "."
    except ValueError:
        return path.name


def machine() -> Machine:
    src = Path(tenure.__file__).resolve().parent.parent
    return Machine(
        nproc=len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 0,
        cpu_model=_cpu_model(),
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.release()}",
        commit=_commit(src),
        tenure_src=_shown(src),
        loadavg_at_start=os.getloadavg(),
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit(src: Path) -> str:
    """The commit of the code under test: the repository's HEAD (and whether ``src`` has
    uncommitted changes), or the ``COMMIT`` file next to a snapshot's ``src``, e.g. one
    made with ``git archive HEAD src | tar -x -C DIR && git rev-parse --short HEAD > DIR/COMMIT``
    and put first on ``PYTHONPATH``."""
    if src != ROOT / "src":
        marker = src.parent / "COMMIT"
        return marker.read_text().strip() if marker.exists() else f"unknown ({src})"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "src"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{'+dirty src' if dirty else ''}"


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")


def command_line() -> str:
    return " ".join([".venv/bin/python", *[_quote(a) for a in sys.argv]])


def _quote(arg: str) -> str:
    return arg if arg and all(c.isalnum() or c in "-_./:=," for c in arg) else repr(arg)


def report_end(
    console: Any,
    started: float,
    args: Any,
    *,
    benchmark: str,
    host: Any,
    store_kind: str,
    results: dict[str, Any],
) -> None:
    """The closing line every benchmark prints, and its JSON record with ``--json``."""
    load_end = os.getloadavg()
    console.print(
        f"total bench time {time.monotonic() - started:.0f} s, load average at end "
        + ", ".join(f"{x:.2f}" for x in load_end)
    )
    if args.json:
        config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        record = {
            "benchmark": benchmark,
            "command": command_line(),
            "machine": asdict(host),
            "loadavg_at_end": load_end,
            "config": config,
            "store": store_kind,
        }
        write_json(args.json, {**record, **results})
