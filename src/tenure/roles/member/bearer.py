"""Who may call a member's HTTP surface: a bearer token, and loopback by default.

``tenure mcp --http`` and ``tenure a2a serve`` act for a member (the MCP worker
speaks as its member; the A2A server signs tasks with the team's lead key), so
whoever reaches their port acts as that member. Both follow one rule: a loopback
address may be served as is, any other only when the operator says so (``--public``)
and gives a token that every request must carry (``Authorization: Bearer``), or
gets 401 and nothing is done. A coding attempt's MCP server always has one.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from typing import Any

from tenure.protocol.errors import ConfigError

__all__ = ["LOOPBACK_NAMES", "BearerGuard", "check_exposure", "is_loopback", "new_token"]

LOOPBACK_NAMES = ("localhost",)
TOKEN_BYTES = 32


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (``127.0.0.0/8``, ``::1``)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, public: bool, token: str | None, flag: str) -> None:
    """A bind beyond loopback needs ``--public`` and a token: whoever reaches the port
    could otherwise act as this member. ``flag`` names the option that gave ``host``."""
    if is_loopback(host):
        return
    if not public:
        raise ConfigError(
            f"{flag}: {host} is not a loopback address; say --public (with --token) "
            "to serve beyond this machine"
        )
    if not token:
        raise ConfigError("--token: a bearer token is needed to serve beyond loopback")


def new_token() -> str:
    """A fresh random bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


class BearerGuard:
    """ASGI middleware: every HTTP request carries ``Authorization: Bearer <token>``,
    except the paths in ``open_paths`` (an A2A agent card, which says how to
    authenticate); any other gets 401 before the app sees it."""

    def __init__(self, app: Any, token: str, *, open_paths: tuple[str, ...] = ()) -> None:
        if not token:
            raise ConfigError("--token: a bearer token cannot be empty")
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.open_paths = open_paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in self.open_paths:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _refuse(send)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Any) -> None:
    body = b'{"error": "a bearer token is required (Authorization: Bearer ...)"}'
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
