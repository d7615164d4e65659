"""A scripted agent standing in for an MCP-capable agent CLI: it launches
`tenure mcp` over stdio with the official MCP SDK and works its one task.

It reads the task, checks in restating the criteria, asks the operator which
currency to use, waits for the answer, and submits a result in that currency.
A real agent (Claude Code, Codex, ...) is pointed at the same command; see
docs/mcp.md.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent


def answer_of(result: CallToolResult) -> dict[str, Any]:
    text = "".join(c.text for c in result.content if isinstance(c, TextContent))
    if result.is_error:
        raise SystemExit(f"agent: the server refused: {text}")
    return dict(result.structured_content or json.loads(text))


async def read_until(
    session: ClientSession, ok: Callable[[dict[str, Any]], bool], seconds: float = 120
) -> dict[str, Any]:
    """``read_task`` every 0.1 s until ``ok`` holds."""
    ends = time.monotonic() + seconds
    while True:
        task = answer_of(await session.call_tool("read_task", {}))
        if ok(task) or time.monotonic() > ends:
            return task
        await anyio.sleep(0.1)


async def work(server_args: list[str], say: Any = print) -> dict[str, Any]:
    """Do the task the server serves; the artifact submitted is returned."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "tenure", *server_args])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        task = answer_of(await session.call_tool("read_task", {"wait_seconds": 30}))
        say(f"agent: my task is {task['task_id']!r}: {task['goal']}")
        criteria = [f"I will make sure that {c}" for c in task["acceptance_criteria"]]
        await session.call_tool(
            "report_progress", {"message": "read the price list", "criteria": criteria}
        )
        touched = await session.call_tool("read_task", {"task_id": "someone-elses-task"})
        say(f"agent: reading another task is refused: {touched.content[0].text}")  # type: ignore[union-attr]
        await session.call_tool("ask_question", {"question": "EUR or USD?"})
        say("agent: asked the operator: EUR or USD?")
        reply = answer_of(await session.call_tool("wait_for_answer", {"timeout_seconds": 60}))
        say(f"agent: the operator answered {reply['answer']!r}")
        task = await read_until(session, lambda t: t["in_hand"])  # the answered task, again
        artifact = {"vendor": "Acme", "currency": reply["answer"], "price": 120.0}
        await session.call_tool(
            "submit_result",
            {
                "status": "completed",
                "artifact": artifact,
                "notes": {"verified": ["the artifact matches the output schema"]},
            },
        )
        say(f"agent: submitted attempt {task['attempt']}: {artifact}")
        task = await read_until(session, lambda t: t["status"] != "working")  # the verdict
        say(f"agent: the leader says the task is {task['state']} ({task['status']})")
        return artifact
