"""One attempt's tools over streamable HTTP on loopback, in a thread of this process.

This is how a coding attempt's agent CLI reports over MCP from inside its sandbox:
the server runs here, outside the sandbox, beside the store, and the agent reaches
it over the loopback network the sandbox shares. Every request carries the
attempt's own bearer token (a fresh one per attempt, given to the agent in its
environment, never in a file), and the tools are bound to that attempt's task. So
the agent needs no store, key or path it could write, and one attempt's agent
cannot speak for another's.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tenure.executors import TaskContext
from tenure.protocol import TaskEnvelope, TaskResult
from tenure.protocol.errors import ConfigError
from tenure.roles.member.bearer import BearerGuard, new_token
from tenure.roles.member.bridge import Bridge
from tenure.roles.member.mcp.tools import worker_server
from tenure.store import Store

__all__ = ["MCP_PATH", "AttemptLink", "LoopbackTools", "attempt_tools"]

MCP_PATH = "/mcp"
START_SECONDS = 15.0
STOP_SECONDS = 5.0


class LoopbackTools:
    """An MCP server (the SDK's, not started) served over streamable HTTP at
    ``http://127.0.0.1:PORT/mcp`` (a free port) until ``stop``; every request must
    carry ``token``."""

    def __init__(self, server: Any, token: str, host: str = "127.0.0.1") -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        port = self.sock.getsockname()[1]
        self.url = f"http://{host}:{port}{MCP_PATH}"
        app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
        config = uvicorn.Config(
            BearerGuard(app, token),
            log_level="warning",
            lifespan="on",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True, name="tenure-mcp"
        )

    def start(self) -> str:
        """Serve; the URL once it answers (``ConfigError`` if it cannot start)."""
        self.thread.start()
        ends = time.monotonic() + START_SECONDS
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > ends:
                self.stop()
                raise ConfigError(f"the attempt's MCP server on {self.url} did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=STOP_SECONDS)
        self.sock.close()


@dataclass(frozen=True)
class AttemptLink:
    """Where the agent reaches its attempt's tools, its token, and its word so far."""

    url: str
    token: str
    word: Callable[[], TaskResult | None]


@contextmanager
def attempt_tools(
    store: Store, team: str, member: str, envelope: TaskEnvelope, ctx: TaskContext
) -> Iterator[AttemptLink]:
    """This attempt's tools (``Bridge(one_attempt=True)``, bound to its task) served on
    loopback with a fresh token while the block runs (the caller runs the agent)."""
    bridge = Bridge(store, team, member, envelope.task_id, one_attempt=True)
    with bridge.lending(envelope, ctx) as word:
        token = new_token()
        served = LoopbackTools(worker_server(bridge, name="tenure"), token)
        url = served.start()
        try:
            yield AttemptLink(url, token, word)
        finally:
            served.stop()
