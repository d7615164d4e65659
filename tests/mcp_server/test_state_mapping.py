"""The MCP Tasks mapping in docs/mcp.md is the one ``read_task`` reports."""

from __future__ import annotations

import re
from pathlib import Path

from tenure.roles.member.agent_view import agent_status
from tenure.store import TERMINAL_STATES

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def documented() -> dict[str, str]:
    """Tenure state -> MCP status, from the table under "The MCP Tasks mapping"."""
    section = DOC.read_text(encoding="utf-8").split("### The MCP Tasks mapping", 1)[1]
    found: dict[str, str] = {}
    for row in re.findall(r"^\| `(\w+)` \| (.+?) \|", section, re.M):
        status, states = row
        for state in re.findall(r"`(\w+)`", states):
            found[state] = status
    return found


def test_every_register_state_has_its_documented_mcp_status() -> None:
    table = documented()
    states = {"queued", "running", "review", "blocked", "failed", *TERMINAL_STATES}
    assert set(table) == states
    assert {state: agent_status(state) for state in states} == table
    assert set(table.values()) == {"working", "input_required", "completed", "failed", "cancelled"}
