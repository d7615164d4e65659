"""The served team's HTTP side: its agent card, the SDK's JSON-RPC routes on one
Starlette app (A2A 1.0 methods, and the 0.3 names ``message/send`` and
``message/stream`` too), and a uvicorn server on a socket bound before it starts, so
a port 0 request knows its port (and the card its URL) up front.

With a token, every request but the card's must carry ``Authorization: Bearer`` (else
401, and nothing reaches the team), and the card says so in the A2A spec's terms: an
HTTP ``bearer`` security scheme, required. The card itself stays readable: it is how a
caller learns that it needs one.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT
from starlette.applications import Starlette

from tenure.coord import Credentials
from tenure.roles.member.bearer import BearerGuard
from tenure.roles.teams.a2a.agent import TeamAgent
from tenure.store import Store

RPC_PATH = "/"
CARD_PATH = "/.well-known/agent-card.json"
BEARER = "bearer"
"""The name of the card's security scheme when a token is required."""


def agent_card(
    team: str, url: str, description: str = "", *, token_required: bool = False
) -> AgentCard:
    """The card of ``team`` served at ``url``: one skill, streaming on; with
    ``token_required``, an HTTP bearer scheme every call must satisfy."""
    about = description or (
        f"The Tenure team {team!r}: each task is worked by the team's members, its result "
        "verified before it is returned; a question for a person comes back as input-required."
    )
    skill = AgentSkill(
        id="run-task",
        name="Run a task",
        description=(
            "A goal as text, or a task as a data part (goal, acceptance_criteria, checks "
            "without commands, output_schema, deadline_seconds); the result is a data part."
        ),
        tags=["tenure", "task"],
        examples=["Summarise the attached notes in three bullet points"],
        input_modes=["text/plain", "application/json"],
        output_modes=["application/json"],
    )
    card = AgentCard(
        name=f"tenure team {team}",
        description=about,
        version="1",
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["application/json"],
        skills=[skill],
    )
    if token_required:
        scheme = HTTPAuthSecurityScheme(
            scheme="Bearer",
            description="the token the server was started with (--token or TENURE_A2A_TOKEN)",
        )
        card.security_schemes[BEARER].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList()}))
    return card


def build_app(
    store: Store,
    team: str,
    url: str,
    *,
    credentials: Credentials | None = None,
    workdir: Path | None = None,
    description: str = "",
    token: str | None = None,
) -> Starlette | BearerGuard:
    """The ASGI app serving ``team`` of ``store`` as an A2A agent at ``url``; with
    ``token``, only to callers that carry it (the card is open to all)."""
    card = agent_card(team, url, description, token_required=bool(token))
    agent = TeamAgent(store, team, credentials=credentials, workdir=workdir)
    handler = DefaultRequestHandler(agent, InMemoryTaskStore(), card)
    routes = [
        *create_agent_card_routes(card, card_url=CARD_PATH),
        *create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=True),
    ]
    app = Starlette(routes=routes)
    return BearerGuard(app, token, open_paths=(CARD_PATH,)) if token else app


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


@dataclass
class A2AServer:
    """uvicorn serving one app on one bound socket; ``run`` blocks until ``stop``."""

    sock: socket.socket
    make_app: Callable[[str], Starlette | BearerGuard]
    stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return url_of(self.sock)

    def run(self) -> None:
        import uvicorn

        config = uvicorn.Config(
            self.make_app(self.url), log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
        watcher = threading.Thread(target=self._watch, daemon=True)
        watcher.start()
        try:
            self._server.run(sockets=[self.sock])
        finally:
            self.stopped.set()

    def stop(self) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        self.stopped.wait()
        self._server.should_exit = True
