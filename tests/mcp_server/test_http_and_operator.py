"""``tenure mcp`` over streamable HTTP (the worker role, behind a bearer token) and the
operator role over stdio, each a real process, with the SDK's own clients; and the
refusals of a bind beyond loopback."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tenure.console.cli import run
from tenure.console.exits import Exit
from tenure.console.mcp.serve import Endpoint, check_exposure, parse_endpoint
from tenure.protocol.errors import ConfigError

from .team import TEAM, data, env, http_server, running_team, text, until

pytestmark = pytest.mark.timeout(120)
TOKEN = "a-long-random-token"


def test_http_worker_needs_its_token_and_the_operator_answers_over_mcp(tmp_path: Path) -> None:
    with running_team(tmp_path) as team:
        worker = team.worker_args("--task", "summary")[3:]  # without "-m tenure mcp"
        operator = StdioServerParameters(
            command=sys.executable,
            args=team.mcp_args("--operator", "--team", TEAM),
            env=env(),
            cwd=str(tmp_path),
        )
        with http_server(team, *worker, token=TOKEN) as server:

            async def both() -> None:
                async with (  # the operator's process starts while the HTTP one does
                    stdio_client(operator) as (oread, owrite),
                    ClientSession(oread, owrite) as person,
                ):
                    url = server.ready()
                    refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                    assert refused.status_code == 401
                    headers = {"Authorization": f"Bearer {TOKEN}"}
                    async with (
                        create_mcp_http_client(headers=headers) as client,
                        streamable_http_client(url, http_client=client) as (read, write),
                        ClientSession(read, write) as agent,
                    ):
                        await agent.initialize()
                        task = data(await agent.call_tool("read_task", {"wait_seconds": 60}))
                        assert task["in_hand"] and task["task_id"] == "summary"
                        data(await agent.call_tool("ask_question", {"question": "EUR or USD?"}))
                        assert until(lambda: team.state() == "blocked", 30)
                        await person.initialize()
                        await _operate(person)
                        answer = data(
                            await agent.call_tool("wait_for_answer", {"timeout_seconds": 10})
                        )
                        assert answer["answer"] == "USD"

            anyio.run(both)


async def _operate(person: ClientSession) -> None:
    rows = data(await person.call_tool("status", {}))["tasks"]
    assert [(r["task_id"], r["state"]) for r in rows] == [("summary", "blocked")]
    items = data(await person.call_tool("inbox", {}))["items"]
    assert [(i["task_id"], i["why"]) for i in items] == [("summary", "EUR or USD?")]
    elsewhere = await person.call_tool("status", {"team": "another-team"})
    assert elsewhere.is_error and "serves team" in text(elsewhere)
    answered = data(await person.call_tool("answer", {"task_id": "summary", "text": "USD"}))
    assert answered["state"] == "queued"
    unknown = await person.call_tool("cancel", {"task_id": "no-such-task"})
    assert unknown.is_error and "has no task 'no-such-task'" in text(unknown)


def test_a_bind_beyond_loopback_needs_public_and_a_token() -> None:
    assert parse_endpoint("127.0.0.1:8765") == Endpoint("127.0.0.1", 8765)
    assert parse_endpoint("[::1]:80").loopback
    with pytest.raises(ConfigError, match="--http: HOST:PORT"):
        parse_endpoint("8765")
    check_exposure(Endpoint("localhost", 1), public=False, token=None)
    with pytest.raises(ConfigError, match="not a loopback address"):
        check_exposure(Endpoint("0.0.0.0", 1), public=False, token=TOKEN)
    with pytest.raises(ConfigError, match="--token"):
        check_exposure(Endpoint("10.1.2.3", 1), public=True, token=None)
    check_exposure(Endpoint("10.1.2.3", 1), public=True, token=TOKEN)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--operator", "--http", "0.0.0.0:8765"], "not a loopback address"),
        (["--operator", "--http", "0.0.0.0:8765", "--public"], "--token"),
        (["--operator", "--token", TOKEN], "go with --http"),
        (["--team", TEAM], "--team T --member ID"),
        (["--operator", "--task", "summary"], "--operator serves no task"),
    ],
)
def test_the_command_refuses_bad_settings_in_one_line(
    args: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["tenure", "mcp", *args])
    monkeypatch.delenv("TENURE_MCP_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit_status:
        run()
    assert exit_status.value.code == Exit.ERROR
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines


def test_without_the_sdk_the_command_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # as if not installed
    monkeypatch.setattr(sys, "argv", ["tenure", "mcp", "--operator"])
    with pytest.raises(SystemExit) as exit_status:
        run()
    assert exit_status.value.code == Exit.ERROR
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "pip install 'tenure[mcp]'" in lines[0], lines
