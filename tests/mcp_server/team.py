"""A real team for the MCP tests: keys, a SQLite store, a leader in a thread, and the
``tenure mcp`` server as a real subprocess (``python -m tenure mcp ...``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mcp.types import CallToolResult, TextContent

from tenure import Leader, LeaderConfig, LeaseTiming, Plan, Store, open_store
from tenure.coord.credentials import Credentials, init_team

TEAM = "mcp-team"
MEMBER = "agent-1"
CRITERIA = ["the summary names the vendor", "the price is in the currency the operator chose"]
T = TypeVar("T")


def plan(*extra: dict[str, Any]) -> Plan:
    schema = {"type": "object", "required": ["vendor", "currency"]}
    return Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [
                {
                    "id": "summary",
                    "goal": "Summarise the vendor's price list",
                    "acceptance_criteria": CRITERIA,
                    "capability": "mcp",
                    "checks": [{"kind": "schema", "schema": schema}],
                    "deadline_seconds": 60,
                },
                *extra,
            ],
        }
    )


@dataclass
class Team:
    tmp: Path
    url: str
    keys: Path
    store: Store
    outcome: list[str]

    def mcp_args(self, *more: str) -> list[str]:
        return [
            "-m", "tenure", "mcp", "--store", self.url, "--keys", str(self.keys),
            "--state-dir", str(self.tmp / "member"), "--member-ttl", "1", *more,
        ]  # fmt: skip

    def worker_args(self, *more: str) -> list[str]:
        return self.mcp_args("--team", TEAM, "--member", MEMBER, *more)

    def state(self, task_id: str = "summary") -> str:
        return self.store.get_task(TEAM, task_id).state


@contextmanager
def running_team(tmp: Path, the_plan: Plan | None = None) -> Iterator[Team]:
    """Keys for the lead and the member, a store, and a leader leading ``the_plan``
    in a thread until the block ends (or the plan is settled)."""
    keys = tmp / "keys"
    init_team(keys, TEAM, [MEMBER])
    url = f"sqlite:///{tmp / 'team.db'}"
    stop = threading.Event()
    outcome: list[str] = []
    with open_store(url) as store:
        config = LeaderConfig(
            team=TEAM,
            member_id="lead-1",
            timing=LeaseTiming(ttl=5.0),  # a loaded machine must not cost the lease
            elect=False,
            poll_interval=0.02,
            state_dir=tmp / "lead",
            credentials=Credentials.load(keys, TEAM, "lead-1", "lead"),
            exit_when_done=False,  # a task blocked on a question must come back after the answer
        )
        leader = Leader(store, config, the_plan or plan())
        thread = threading.Thread(target=lambda: outcome.append(leader.lead(stop)), daemon=True)
        thread.start()
        try:
            yield Team(tmp, url, keys, store, outcome)
        finally:
            stop.set()
            thread.join(timeout=10)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def ready(self) -> str:
        """Its URL, once it listens (the test fails with its log if it died)."""
        until(lambda: _listening(self.port) or self.proc.poll() is not None, 60)
        assert self.proc.poll() is None, self.log.read_text()
        return f"http://127.0.0.1:{self.port}/mcp"


@contextmanager
def http_server(team: Team, *args: str, token: str | None = None) -> Iterator[HttpServer]:
    """``tenure mcp ... --http 127.0.0.1:PORT`` as a subprocess, stopped with SIGTERM."""
    port = free_port()
    extra = ["--token", token] if token else []
    path = team.tmp / f"mcp-{port}.log"
    with path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, *team.mcp_args(*args, "--http", f"127.0.0.1:{port}", *extra)],
            stdout=log, stderr=subprocess.STDOUT, env=env(),
        )  # fmt: skip
        try:
            yield HttpServer(proc, port, path)
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def until(ok: Callable[[], T], seconds: float) -> T:
    ends = time.monotonic() + seconds
    while True:
        value = ok()
        if value or time.monotonic() > ends:
            return value
        time.sleep(0.05)


def data(result: CallToolResult) -> dict[str, Any]:
    """A tool call's structured answer (it must not be an error)."""
    assert not result.is_error, text(result)
    if isinstance(result.structured_content, dict):
        return result.structured_content
    return dict(json.loads(text(result)))


def text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))
