"""The MCP SDK, imported only when a server is made: without the extra, one line."""

from __future__ import annotations

from typing import Any

from tenure.protocol.errors import ConfigError

INSTALL_HINT = "tenure mcp needs the MCP SDK: pip install 'tenure[mcp]'"


def server_class() -> Any:
    """``mcp.server.mcpserver.MCPServer`` (mcp 2), or one ``ConfigError`` saying how to get it."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return MCPServer


def tool_error() -> type[Exception]:
    """The exception a tool raises to answer its caller with an error (one line)."""
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError
