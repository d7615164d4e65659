"""Who may give a served team work, and which teams may be served: a bearer token
(required beyond loopback; the card says so in the A2A spec's terms), and a team a
leader leads, whose live leader dispatches each A2A task like a planned one.

Driven by the SDK's own client over real HTTP on loopback, with a real leader and a
real signed member in threads on a SQLite store."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.helpers.proto_helpers import get_data_parts, get_message_text
from a2a.types import Task, TaskState
from test_a2a_server import TEAM, request, send, sqlite_store, work

import tenure
from conftest import LEASE_TOKEN
from tenure import Leader, LeaderConfig, LeaseTiming, Plan
from tenure.console.cli import run
from tenure.console.exits import Exit
from tenure.coord.credentials import Credentials, init_team
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.teams import QueueWorker
from tenure.roles.teams.a2a import A2AServer, bound_socket, build_app
from tenure.roles.teams.a2a.running import ServedTeam
from tenure.store import Store

__all__ = ["sqlite_store"]  # the fixture, used here too

TOKEN = "s3cret-token-for-the-a2a-server"
pytestmark = pytest.mark.timeout(60)


@contextmanager
def guarded(store: Store) -> Iterator[str]:
    """The team's A2A server, with a token, and a queue worker, in threads; yields the URL."""
    stop = threading.Event()
    worker = QueueWorker(store, TEAM, "w1", tenure.PythonExecutor(work), poll_interval=0.01)
    server = A2AServer(
        bound_socket("127.0.0.1", 0), lambda url: build_app(store, TEAM, url, token=TOKEN)
    )
    threads = [
        threading.Thread(target=server.run, daemon=True),
        threading.Thread(target=worker.run, args=(stop,), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield server.url
    finally:
        stop.set()
        server.stop()
        for thread in threads:
            thread.join(timeout=5)


class Token(CredentialService):
    """The caller's token, for the scheme the card names."""

    async def get_credentials(self, name: str, context: ClientCallContext | None) -> str | None:
        return TOKEN if name == "bearer" else None


async def send_with_token(url: str, text: str) -> Task:
    """message/send through the SDK's client, which reads the card's security scheme
    and adds the bearer token itself."""
    async with httpx.AsyncClient(timeout=10) as http:
        client = await create_client(
            url,
            ClientConfig(streaming=False, httpx_client=http),
            interceptors=[AuthInterceptor(Token())],
        )
        got = [event async for event in client.send_message(request(text))]
    assert got and got[-1].HasField("task"), got
    return got[-1].task


def rpc(text: str) -> dict[str, Any]:
    message = {"role": "user", "kind": "message", "messageId": "m1"}
    message["parts"] = [{"kind": "text", "text": text}]  # type: ignore[assignment]
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


def test_a_caller_without_the_token_gets_401_and_nothing_is_registered(
    sqlite_store: Store,
) -> None:
    with guarded(sqlite_store) as url:
        card = httpx.get(url + ".well-known/agent-card.json", timeout=5)
        bare = httpx.post(url, json=rpc("do it"), timeout=5)
        wrong = httpx.post(
            url, json=rpc("do it"), headers={"Authorization": "Bearer no"}, timeout=5
        )
        task = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "GetTask"}, timeout=5)
        assert tenure.tasks(sqlite_store, TEAM) == []  # nothing reached the team
        made = asyncio.run(send_with_token(url, "with the token"))
    assert card.status_code == 200  # the card says how to authenticate, so it is open
    shown = card.json()
    assert shown["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert shown["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    for refused in (bare, wrong, task):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
    assert made.status.state == TaskState.TASK_STATE_COMPLETED
    (registered,) = tenure.tasks(sqlite_store, TEAM)  # the caller with the token's only
    assert registered.task_id == f"a2a-{made.id}"


def test_serving_beyond_loopback_needs_a_token(sqlite_store: Store) -> None:
    open_wide = ServedTeam(sqlite_store, TEAM, host="0.0.0.0", port=0)
    with pytest.raises(tenure.ConfigError, match="needs a bearer token"):
        open_wide.run(threading.Event(), on_ready=lambda url: None)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--host", "0.0.0.0"], "--host: 0.0.0.0 is not a loopback address; say --public"),
        (["--host", "0.0.0.0", "--public"], "--token: a bearer token is needed"),
        (["--public"], "--public goes with --token"),
    ],
)
def test_the_command_refuses_an_open_bind_in_one_line(
    tmp_path: Path,
    flags: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "never" / "state.db"
    args = ["a2a", "serve", "--team", TEAM, "--store", f"sqlite:///{db}", "--insecure", *flags]
    monkeypatch.setattr(sys, "argv", ["tenure", *args])
    monkeypatch.delenv("TENURE_A2A_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit_status:
        run()
    assert exit_status.value.code == Exit.ERROR
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines
    assert not db.parent.exists()  # refused before anything was opened


def test_tenure_a2a_serve_beyond_loopback_with_public_and_a_token(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'state.db'}"
    env = {**os.environ, "NO_COLOR": "1", "TENURE_A2A_TOKEN": TOKEN}
    env.pop("TENURE_STORE", None)
    server = subprocess.Popen(
        [
            sys.executable, "-m", "tenure", "a2a", "serve", "--team", TEAM, "--store", store,
            "--host", "0.0.0.0", "--public", "--port", "0", "--exec", "noop", "--insecure",
        ],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        printed = server.stdout.readline().strip()
        assert printed.startswith("http://0.0.0.0:"), server.stderr.read() if server.stderr else ""
        url = printed.replace("0.0.0.0", "127.0.0.1")
        assert httpx.post(url, json=rpc("no token"), timeout=5).status_code == 401
        done = asyncio.run(send_with_token(url, "with the token"))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        with tenure.open_store(store) as opened:
            (made,) = tenure.tasks(opened, TEAM)  # only the caller with the token's
            assert made.task_id == f"a2a-{done.id}"
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=15)


# --- a team a leader leads -------------------------------------------------------------


@contextmanager
def led_team(store: Store, keys: Path) -> Iterator[Credentials]:
    """A signed team: its leader (started first, with a plan of its own) and one member
    in threads; yields the lead key the A2A server signs with."""
    init_team(keys, TEAM, ["w1"])
    lead = Credentials.load(keys, TEAM, "lead", "lead")
    stop = threading.Event()
    plan = Plan.model_validate({"team": TEAM, "tasks": [{"id": "planned", "goal": "warm up"}]})
    leader = Leader(
        store,
        LeaderConfig(
            team=TEAM, member_id="lead", timing=LeaseTiming(ttl=5.0), elect=False,
            poll_interval=0.02, exit_when_done=False, credentials=lead,
        ),
        plan,
    )  # fmt: skip
    member = Follower(
        store,
        FollowerConfig(
            team=TEAM, member_id="w1", poll_interval=0.02,
            credentials=Credentials.load(keys, TEAM, "w1", "work"),
        ),
        tenure.PythonExecutor(work),
    )  # fmt: skip
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True) for m in (leader, member)]
    for thread in threads:
        thread.start()
    try:
        yield lead
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)


@contextmanager
def serving(served_team: ServedTeam) -> Iterator[str]:
    """``served_team`` as ``tenure a2a serve`` runs it, in a thread; yields its URL."""
    stop, ready = threading.Event(), threading.Event()
    urls: list[str] = []

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    thread = threading.Thread(target=served_team.run, args=(stop, on_ready), daemon=True)
    thread.start()
    try:
        assert ready.wait(10), "the served team never listened"
        yield urls[0]
    finally:
        stop.set()
        thread.join(timeout=10)


def until_done(store: Store, task_id: str) -> None:
    for _ in range(600):
        if any(t.task_id == task_id and t.state == "done" for t in store.tasks(TEAM)):
            return
        threading.Event().wait(0.05)
    raise AssertionError(store.tasks(TEAM))


def test_a_task_for_a_led_team_is_registered_signed_and_its_live_leader_runs_it(
    sqlite_store: Store, tmp_path: Path
) -> None:
    with led_team(sqlite_store, tmp_path / "keys") as lead:
        until_done(sqlite_store, "planned")  # the leader runs, its plan done
        with serving(ServedTeam(sqlite_store, TEAM, port=0, credentials=lead)) as url:
            done = asyncio.run(send(url, request("hello from A2A")))
            asked = asyncio.run(send(url, request("ask for a currency")))
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            answered = asyncio.run(send(url, request("CHF", task=asked)))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    assert get_data_parts(list(done.artifacts[0].parts))[0]["goal"] == "hello from A2A"
    made = sqlite_store.get_task(TEAM, f"a2a-{done.id}")
    assert made.state == "done" and made.assignee == "w1"  # the leader dispatched it
    assert made.spec["signature"]["by"] == "lead"  # signed with the team's lead key
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED  # re-dispatched by the leader
    assert get_data_parts(list(answered.artifacts[-1].parts))[0]["answer"] == "CHF"


def test_a_led_team_with_no_leader_running_rejects_the_task_in_words(sqlite_store: Store) -> None:
    lease = sqlite_store.claim_lease(TEAM, "gone", 5.0, token=LEASE_TOKEN)
    assert lease is not None
    sqlite_store.release_lease(TEAM, "gone", lease.epoch, token=LEASE_TOKEN)
    with serving(ServedTeam(sqlite_store, TEAM, port=0)) as url:
        refused = asyncio.run(send(url, request("nobody leads")))
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert "none runs now" in get_message_text(refused.status.message)
    assert tenure.tasks(sqlite_store, TEAM) == []


# --- a Tenure worker calling a team served with a token ----------------------------------


def call_through_a2a(url: str) -> tenure.TaskOutcome:
    plan = Plan.model_validate(
        {"team": "callers", "max_attempts": 1, "tasks": [{"id": "t", "goal": "relay this"}]}
    )
    team = tenure.Team(plan, executor=f"a2a:{url}", store=tenure.open_store("memory://"), workers=1)
    return team.run(timeout=20).tasks["t"]


def test_an_a2a_worker_presents_its_token_to_a_team_whose_card_asks_for_one(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with guarded(sqlite_store) as url:
        monkeypatch.delenv("TENURE_A2A_REMOTE_TOKEN", raising=False)
        refused = call_through_a2a(url)
        monkeypatch.setenv("TENURE_A2A_REMOTE_TOKEN", TOKEN)
        relayed = call_through_a2a(url)
    assert refused.state == "blocked" and "401" in str(refused.reason), refused
    assert relayed.state == "done", relayed
    assert relayed.artifact == {"goal": "relay this", "answer": None, "n": 3}
