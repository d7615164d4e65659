"""A team served as an A2A agent, driven by the SDK's own client over real HTTP on
loopback: the card, send → completed with the artifact, a question → input-required →
the follow-up answers it, streaming, a refused plan, cancelling; and ``tenure a2a
serve`` as a process."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_message_text,
    new_data_part,
    new_message,
    new_text_part,
)
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

import tenure
from conftest import LEASE_TOKEN
from tenure.coord.credentials import Credentials, init_team
from tenure.executors import TaskContext, make_result
from tenure.protocol import TaskEnvelope
from tenure.protocol.envelope import ResultStatus
from tenure.roles.member.agent_view import agent_status
from tenure.roles.teams import QueueWorker
from tenure.roles.teams.a2a import A2AServer, bound_socket, build_app
from tenure.roles.teams.a2a.running import ServedTeam
from tenure.store import TASK_STATES, Store

TEAM = "front"


def work(envelope: TaskEnvelope, ctx: TaskContext) -> Any:
    """The team's worker: asks when told to, waits when told to, else echoes."""
    goal = envelope.goal
    answers = envelope.input.get("operator_answers") or []
    if goal.startswith("ask") and not answers:
        return make_result(envelope, "blocked", question="Which currency?")
    if goal.startswith("slow"):
        ctx.cancelled.wait(1)
        return {"late": True}
    return {"goal": goal, "answer": answers[-1]["answer"] if answers else None, "n": 3}


@contextmanager
def served(
    store: Store, workers: int = 1, credentials: Credentials | None = None
) -> Iterator[str]:
    """The team's A2A server and its queue workers, in threads; yields the URL."""
    stop = threading.Event()
    members = [
        QueueWorker(store, TEAM, f"w{n}", tenure.PythonExecutor(work), poll_interval=0.01)
        for n in range(1, workers + 1)
    ]
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True) for m in members]
    server = A2AServer(
        bound_socket("127.0.0.1", 0),
        lambda url: build_app(store, TEAM, url, credentials=credentials),
    )
    threads.append(threading.Thread(target=server.run, daemon=True))
    for thread in threads:
        thread.start()
    try:
        yield server.url
    finally:
        stop.set()
        server.stop()
        for thread in threads:
            thread.join(timeout=5)


def request(text: str = "", data: Any = None, task: Task | None = None) -> SendMessageRequest:
    parts = [new_text_part(text)] if text else []
    if data is not None:
        parts.append(new_data_part(data))
    message = new_message(parts=parts, role=Role.ROLE_USER)
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration())


async def events(url: str, req: SendMessageRequest, *, streaming: bool) -> list[StreamResponse]:
    async with httpx.AsyncClient(timeout=10) as http:
        client = await create_client(url, ClientConfig(streaming=streaming, httpx_client=http))
        return [event async for event in client.send_message(req)]


async def send(url: str, req: SendMessageRequest) -> Task:
    """message/send, blocking: the task as it stands when it ends or waits for input."""
    got = await events(url, req, streaming=False)
    assert got and got[-1].HasField("task"), got
    return got[-1].task


def states(got: list[StreamResponse]) -> list[str]:
    return [
        TaskState.Name(e.status_update.status.state).removeprefix("TASK_STATE_")
        for e in got
        if e.HasField("status_update")
    ]


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    with tenure.open_store(sqlite_url) as opened:
        yield opened


def test_the_card_names_the_team_its_skill_and_streaming(sqlite_store: Store) -> None:
    with served(sqlite_store) as url:
        card = httpx.get(url + ".well-known/agent-card.json", timeout=5).json()
    assert TEAM in card["name"] and card["description"]
    assert card["capabilities"]["streaming"] is True
    assert [s["id"] for s in card["skills"]] == ["run-task"]
    assert card["supportedInterfaces"][0]["url"] == url


def test_send_runs_a_task_of_the_team_and_returns_its_artifact(store: Store) -> None:
    with served(store) as url:
        task = asyncio.run(send(url, request("price the vendors")))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_data_parts(list(task.artifacts[0].parts)) == [
        {"goal": "price the vendors", "answer": None, "n": 3.0}
    ]
    (made,) = tenure.tasks(store, TEAM)
    assert made.task_id == f"a2a-{task.id}" and made.state == "done"


def test_a_question_is_input_required_and_the_follow_up_answers_it(sqlite_store: Store) -> None:
    with served(sqlite_store) as url:
        asked = asyncio.run(send(url, request("ask first")))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert get_message_text(asked.status.message) == "Which currency?"
        (waiting,) = tenure.inbox(sqlite_store, [TEAM])
        assert waiting.why == "Which currency?"
        done = asyncio.run(send(url, request("EUR", task=asked)))
    assert done.id == asked.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    artifact = get_data_parts(list(done.artifacts[-1].parts))[0]
    assert artifact["answer"] == "EUR"


def test_streaming_yields_working_then_completed(sqlite_store: Store) -> None:
    with served(sqlite_store) as url:
        got = asyncio.run(events(url, request("stream it"), streaming=True))
    seen = states(got)
    assert "WORKING" in seen and seen[-1] == "COMPLETED"
    assert seen.index("WORKING") < seen.index("COMPLETED")
    assert any(e.HasField("artifact_update") for e in got)


def test_a_plan_in_a_data_part_is_the_task_and_a_refused_one_is_rejected(
    sqlite_store: Store,
) -> None:
    task = {"goal": "from data", "acceptance_criteria": ["has a goal"], "deadline_seconds": 30}
    bad = {"goal": "x", "checks": [{"kind": "command", "run": "touch owned"}]}
    with served(sqlite_store) as url:
        done = asyncio.run(send(url, request(data={"tasks": [task]})))
        refused = asyncio.run(send(url, request(data=bad)))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    (made,) = tenure.tasks(sqlite_store, TEAM)
    assert made.spec.acceptance_criteria == ["has a goal"]
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert "command check" in get_message_text(refused.status.message)


def test_cancel_from_the_caller_cancels_the_team_task(sqlite_store: Store) -> None:
    async def scenario(url: str) -> tuple[Task, Task]:
        async with httpx.AsyncClient(timeout=10) as http:
            client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
            req = request("slow work")
            req.configuration.return_immediately = True
            started = [e async for e in client.send_message(req)][-1].task
            await _until_working(client, started.id)
            cancelled = await client.cancel_task(CancelTaskRequest(id=started.id))
            return started, cancelled

    with served(sqlite_store) as url:
        started, cancelled = asyncio.run(scenario(url))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    (made,) = tenure.tasks(sqlite_store, TEAM)
    assert made.task_id == f"a2a-{started.id}" and made.state == "cancelled"


async def _until_working(client: Any, task_id: str) -> None:
    for _ in range(100):
        task = await client.get_task(GetTaskRequest(id=task_id))
        if task.status.state == TaskState.TASK_STATE_WORKING:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the task never started")


def mapping_rows() -> list[list[str]]:
    """The cells of each row of protocol.md's table "Mapping to A2A and MCP Tasks"."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    section = doc.split("## Mapping to A2A and MCP Tasks", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.split("|")[1:-1]] for line in table[2:]]


def ticked(cell: str) -> set[str]:
    return set(re.findall(r"`([\w-]+)`", cell))


def test_the_protocol_docs_table_is_the_mapping_the_server_uses() -> None:
    from tenure.roles.teams.a2a import A2A_STATES

    documented: dict[str, str] = {}
    for state, _, a2a, mcp, _ in mapping_rows():
        if not state.startswith("`"):
            continue
        name = state.split()[0].strip("`")
        documented.setdefault(name, a2a.strip("`"))  # the first row: the state as such
        retried = name == "queued" and "retry" in state
        assert a2a.strip("`") == ("working" if retried else A2A_STATES[name]), state
        assert mcp.strip("`") == agent_status(name), state
    assert documented == A2A_STATES


def test_the_mapping_table_has_every_state_and_status_on_both_sides() -> None:
    rows = mapping_rows()
    columns = [set().union(*(ticked(row[n]) for row in rows)) for n in range(4)]
    tenure_states, result_statuses, a2a_states, mcp_statuses = columns
    assert set(TASK_STATES) <= tenure_states
    assert set(get_args(ResultStatus)) <= result_statuses
    every_a2a = {
        name.removeprefix("TASK_STATE_").lower().replace("_", "-")
        for name in TaskState.keys()  # noqa: SIM118 - a protobuf enum, not a dict
        if name != "TASK_STATE_UNSPECIFIED"
    }
    assert a2a_states == every_a2a
    assert mcp_statuses == {"working", "input_required", "completed", "failed", "cancelled"}


def serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TENURE_STORE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tenure", "a2a", "serve", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def test_serve_works_signed_tasks_and_stops_on_sigterm(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'state.db'}"
    keys = tmp_path / "keys"
    init_team(keys, "front")  # the lead key: the server makes its workers' keys
    server = serve(
        tmp_path, "--team", "front", "--store", store, "--port", "0", "--exec", "noop",
        "--keys", str(keys), "--workers", "1",
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), server.stderr.read() if server.stderr else ""
        task = asyncio.run(send(url, request("signed work")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        with tenure.open_store(store) as opened:
            (made,) = tenure.tasks(opened, "front")
            assert made.state == "done" and made.spec.signature is not None
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=15)
    assert server.returncode == 128 + signal.SIGTERM


def test_queue_workers_for_a_team_led_by_a_leader_are_refused(sqlite_store: Store) -> None:
    sqlite_store.claim_lease("led", "someone", 5.0, token=LEASE_TOKEN)
    noop = tenure.PythonExecutor(work)
    with pytest.raises(tenure.ConfigError, match="--exec runs queue workers"):
        ServedTeam(sqlite_store, "led", executor=noop, worker_ids=["w1"]).run(
            threading.Event(), on_ready=lambda url: None
        )


def test_the_0_3_method_name_message_send_works_on_the_wire(sqlite_store: Store) -> None:
    message = {"role": "user", "kind": "message", "messageId": "m1"}
    message["parts"] = [{"kind": "text", "text": "plain json-rpc"}]  # type: ignore[assignment]
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    with served(sqlite_store) as url:
        answer = httpx.post(url, json=body, timeout=10).json()
    assert answer["result"]["status"]["state"] == "completed"
    assert answer["result"]["artifacts"][0]["parts"][0]["data"]["goal"] == "plain json-rpc"
