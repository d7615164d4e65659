"""The transports: stdio (the default), and streamable HTTP on loopback, or on another
interface only with a bearer token that every request must carry."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from tenure.protocol.errors import ConfigError
from tenure.roles.member.bearer import BearerGuard, is_loopback
from tenure.roles.member.bearer import check_exposure as check_host

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"


def parse_endpoint(value: str) -> Endpoint:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6), or one line saying what was expected."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http: HOST:PORT, e.g. 127.0.0.1:8765; got {value[:80]!r}")
    return Endpoint(host, int(port))


def check_exposure(endpoint: Endpoint, *, public: bool, token: str | None) -> None:
    """A bind beyond loopback needs ``--public`` and a token: whoever reaches the port
    could otherwise act as this member (or as the operator)."""
    check_host(endpoint.host, public=public, token=token, flag="--http")


def serve(server: Any, endpoint: Endpoint | None, *, token: str | None = None) -> None:
    """Serve until the client hangs up (stdio) or the process is stopped (HTTP)."""
    if endpoint is None:
        server.run("stdio")
        return
    import anyio
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=endpoint.host)
    guarded = BearerGuard(app, token) if token else app
    config = uvicorn.Config(
        guarded, host=endpoint.host, port=endpoint.port, log_level="warning", lifespan="on"
    )
    print(f"tenure mcp: serving {endpoint.url}", file=sys.stderr, flush=True)
    anyio.run(uvicorn.Server(config).serve)
