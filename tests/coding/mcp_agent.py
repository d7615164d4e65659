"""A coding agent that reports over MCP, as ``tenure code --agent-mcp`` runs one: it
speaks to its attempt's server (``TENURE_MCP_URL``, with the bearer token in
``TENURE_MCP_TOKEN``) with the official MCP SDK's client, from inside the sandbox.

Usage: mcp_agent.py CONFIG. CONFIG is JSON ``{"<task>": {"file": "m1.py", "mode": M}}``.
Modes: fix (write the fix, submit completed), lie (change nothing, submit completed),
ask (ask the operator, stop), quiet (fix, submit nothing, write the result file).
Before its word it checks in, tries a call without the token and one naming another
task; what the server said to each goes into its report (``notes.verified``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent


def said(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def data(result: CallToolResult) -> dict[str, Any]:
    if result.is_error:
        raise SystemExit(f"mcp agent: refused: {said(result)}")
    return dict(result.structured_content or json.loads(said(result)))


async def work(spec: dict[str, Any]) -> None:
    url, token = os.environ["TENURE_MCP_URL"], os.environ["TENURE_MCP_TOKEN"]
    seen: list[str] = []
    bare = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    seen.append(f"without the token: HTTP {bare.status_code}")
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        seen.append("tools: " + ", ".join(tools))
        task = data(await session.call_tool("read_task", {}))
        assert task["task_id"] == os.environ["TENURE_TASK_ID"], task
        checkin = data(await session.call_tool("report_progress", {"message": "read my task"}))
        seen.append("criteria restated: " + " | ".join(checkin["acceptance_criteria"]))
        other = await session.call_tool("read_task", {"task_id": "someone-elses"})
        seen.append(f"another task: {said(other)}")
        mode, target = spec["mode"], anyio.Path(spec["file"])
        if mode in ("fix", "quiet"):
            await target.write_text("def value():\n    return 1\n")
        if mode == "ask":
            data(await session.call_tool("ask_question", {"question": "Which value, 1 or 2?"}))
            return
        if mode == "quiet":
            await anyio.Path(os.environ["TENURE_RESULT_FILE"]).write_text(
                "## Changed\n\nfrom the file\n"
            )
            return
        notes = {"changed": [str(target)], "verified": seen, "uncertain": []}
        word = {"status": "completed", "notes": notes, "artifact": {"mode": mode}}
        sent = data(await session.call_tool("submit_result", word))
        assert sent["submitted"] is True and "stop now" in sent["next"], sent
        late = await session.call_tool("submit_result", word)
        assert late.is_error, said(late)  # one word per attempt


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    anyio.run(work, config[os.environ["TENURE_TASK_ID"]])


if __name__ == "__main__":
    main()
