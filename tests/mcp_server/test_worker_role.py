"""``tenure mcp`` worker role, driven by the SDK's own client over stdio against a
real team: a leader in a thread and the server as a real ``python -m tenure`` process.

The story: the agent reads its task, may not read another, is refused hostile
input in one line, asks a question, the operator answers with ``tenure.answer``,
the agent reads the answer and the new attempt, submits, and the leader's ladder
accepts the result, signed by the member's key.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import tenure
from tenure.protocol.limits import MAX_JSON_DEPTH

from .team import CRITERIA, MEMBER, TEAM, Team, data, env, running_team, text, until

pytestmark = pytest.mark.timeout(120)


def test_an_agent_reads_asks_is_answered_and_its_result_is_accepted(tmp_path: Path) -> None:
    with running_team(tmp_path) as team:
        params = StdioServerParameters(
            command=sys.executable, args=team.worker_args(), env=env(), cwd=str(tmp_path)
        )

        async def agent() -> None:
            with (tmp_path / "server.err").open("w") as errlog:
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    await _story(session, team)

        anyio.run(agent)
        final = team.store.get_task(TEAM, "summary")
        assert final.state == "done", final
        assert final.result is not None
        assert final.result["signature"]["by"] == MEMBER  # signed by the member's own key
        assert final.result["artifact"] == {"vendor": "Acme", "currency": "EUR"}


async def _story(session: ClientSession, team: Team) -> None:
    names = {t.name for t in (await session.list_tools()).tools}
    assert names == {
        "read_task",
        "report_progress",
        "ask_question",
        "wait_for_answer",
        "submit_result",
    }

    task = data(await session.call_tool("read_task", {"wait_seconds": 60}))
    assert (task["task_id"], task["attempt"], task["in_hand"]) == ("summary", 1, True)
    assert task["acceptance_criteria"] == CRITERIA
    assert task["status"] == "working"

    other = await session.call_tool("read_task", {"task_id": "someone-elses"})
    assert other.is_error and "not in its scope" in text(other)
    assert len(text(other).splitlines()) == 1
    touch = await session.call_tool("submit_result", {"status": "completed", "task_id": "x"})
    assert touch.is_error and "not in its scope" in text(touch)

    huge = await session.call_tool(
        "submit_result", {"status": "completed", "artifact": "x" * 300_000}
    )
    assert huge.is_error and "the limit is" in text(huge) and len(text(huge).splitlines()) == 1
    deep: object = "bottom"
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    nested = await session.call_tool("submit_result", {"status": "completed", "artifact": deep})
    assert nested.is_error and "nested at most" in text(nested)
    assert len(text(nested).splitlines()) == 1
    forged = await session.call_tool("submit_result", {"status": "done"})
    assert forged.is_error and "status" in text(forged)
    short = await session.call_tool("report_progress", {"message": "reading", "criteria": ["one"]})
    assert short.is_error and "all 2 acceptance criteria restated, or none; got 1" in text(short)
    bare = data(await session.call_tool("report_progress", {"message": "reading the list"}))
    assert bare["recorded"] is True
    assert bare["acceptance_criteria"] == CRITERIA  # restated to the agent at each check-in
    assert [c["kind"] for c in bare["checks"]] == ["schema"]

    said = data(
        await session.call_tool(
            "report_progress",
            {
                "message": "read the list",
                "criteria": ["name the vendor", "use the chosen currency"],
            },
        )
    )
    assert said["recorded"] is True

    asked = data(await session.call_tool("ask_question", {"question": "Which currency?"}))
    assert asked["asked"] is True
    assert until(lambda: team.state() == "blocked", 30)
    waiting = data(await session.call_tool("read_task", {}))
    assert waiting["status"] == "input_required" and waiting["question"] == "Which currency?"
    tenure.answer(team.store, TEAM, "summary", "EUR", keys=team.keys)

    answer = data(await session.call_tool("wait_for_answer", {"timeout_seconds": 10}))
    assert answer == {"answered": True, "question": "Which currency?", "answer": "EUR"}
    again = await _next_attempt(session)
    assert again["input"]["operator_answers"][0]["answer"] == "EUR"

    sent = data(
        await session.call_tool(
            "submit_result",
            {
                "status": "completed",
                "artifact": {"vendor": "Acme", "currency": "EUR"},
                "notes": {"verified": ["the artifact has both fields"]},
            },
        )
    )
    assert sent["submitted"] is True
    done = await _read_until(session, lambda task: task["status"] == "completed")
    assert (done["state"], done["status"]) == ("done", "completed")
    late = await session.call_tool("submit_result", {"status": "completed", "artifact": {}})
    assert late.is_error and "no attempt" in text(late)


async def _next_attempt(session: ClientSession) -> dict[str, Any]:
    return await _read_until(session, lambda task: task["in_hand"] and task["attempt"] == 2)


async def _read_until(
    session: ClientSession, ok: Callable[[dict[str, Any]], bool], seconds: float = 60
) -> dict[str, Any]:
    """``read_task`` again until ``ok`` holds (a loaded machine may be slow to get there)."""
    ends = time.monotonic() + seconds
    while True:
        task = data(await session.call_tool("read_task", {}))
        if ok(task):
            return task
        assert time.monotonic() < ends, f"read_task never got there: {task}"
        await anyio.sleep(0.05)
