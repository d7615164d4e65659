"""Counts and times every Redis round trip a process makes (for the Tenure profile).

As a wrapper: ``python probe.py OUT.json [--cprofile OUT.prof] -- tenure worker ...`` runs
the ``tenure`` CLI with redis-py patched; at exit it writes, per command (a Tenure
Lua script by name, ``EVALSHA:<name>``), the number of round trips and the seconds
spent waiting for them. SIGUSR1 zeroes the counts (sent at the end of the warm-up).
In-process: ``install()``, ``reset()``, ``snapshot()``.
"""

from __future__ import annotations

import atexit
import cProfile
import hashlib
import json
import signal
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import redis
import redis.client

_lock = threading.Lock()
_calls: dict[str, int] = defaultdict(int)
_seconds: dict[str, float] = defaultdict(float)
_names: dict[str, str] = {}
_installed = False


def _script_names() -> dict[str, str]:
    try:
        from tenure.store.redis.scripts import PRELUDE, SCRIPTS
    except ImportError:
        return {}
    return {
        hashlib.sha1((PRELUDE + body).encode()).hexdigest(): name for name, body in SCRIPTS.items()
    }


def _record(name: str, seconds: float) -> None:
    with _lock:
        _calls[name] += 1
        _seconds[name] += seconds


def install() -> None:
    """Patch redis-py: one client call or one pipeline execute = one round trip."""
    global _installed
    if _installed:
        return
    _installed = True
    _names.update(_script_names())
    plain = redis.client.Redis.execute_command
    pipelined = redis.client.Pipeline.execute

    def execute_command(self: Any, *args: Any, **options: Any) -> Any:
        if isinstance(self, redis.client.Pipeline):
            return plain(self, *args, **options)  # buffered: no round trip yet
        name = str(args[0]).upper()
        if name == "EVALSHA":
            name = f"EVALSHA:{_names.get(str(args[1]), str(args[1])[:8])}"
        started = time.perf_counter()
        reply = plain(self, *args, **options)
        elapsed = time.perf_counter() - started
        if name == "EVALSHA:receive" and isinstance(reply, list) and len(reply) <= 1:
            name = "EVALSHA:receive (empty)"
        _record(name, elapsed)
        return reply

    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return pipelined(self, *args, **kwargs)
        finally:
            _record("PIPELINE", time.perf_counter() - started)

    redis.client.Redis.execute_command = execute_command  # type: ignore[method-assign]
    redis.client.Pipeline.execute = execute  # type: ignore[method-assign]


def snapshot() -> dict[str, dict[str, float]]:
    with _lock:
        return {k: {"calls": _calls[k], "seconds": _seconds[k]} for k in sorted(_calls)}


def reset() -> None:
    with _lock:
        _calls.clear()
        _seconds.clear()


def main() -> None:
    argv = sys.argv[1:]
    out = Path(argv.pop(0))
    profile_out: Path | None = None
    if argv and argv[0] == "--cprofile":
        argv.pop(0)
        profile_out = Path(argv.pop(0))
    if argv and argv[0] == "--":
        argv.pop(0)
    if not argv or argv[0] != "tenure":
        raise SystemExit("usage: probe.py OUT.json [--cprofile OUT.prof] -- tenure ARGS...")
    install()
    profiler = cProfile.Profile() if profile_out else None

    def dump() -> None:
        if profiler is not None and profile_out is not None:
            profiler.disable()
            profiler.dump_stats(str(profile_out))
        out.write_text(json.dumps(snapshot(), indent=1))

    atexit.register(dump)
    signal.signal(signal.SIGUSR1, lambda signum, frame: reset())  # end of the warm-up
    from tenure.console.cli import main as tenure_main

    sys.argv = ["tenure", *argv[1:]]
    if profiler is not None:
        profiler.enable()
    try:
        tenure_main()
    except SystemExit:
        pass


if __name__ == "__main__":
    main()
