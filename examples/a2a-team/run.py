"""Run the A2A example: a Tenure team served as an A2A agent, and a remote A2A agent
as a Tenure worker. No API key; everything listens on loopback only.

    python examples/a2a-team/run.py

1. `tenure a2a serve` serves the team "front" on a free loopback port, its workers
   running agent.py; the SDK's client sends it a task (and then one that asks a
   question, answered by a follow-up message) and prints the results.
2. remote.py, a tiny agent built with the SDK alone, is served on another port;
   `tenure run plan.yaml --exec a2a:URL` gives the plan's task to it, and the team's
   ladder checks its answer against the plan's schema before accepting it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path


def _use_the_projects_venv() -> None:
    """Run under the checkout's .venv when this Python lacks tenure (or what it needs), so
    `python examples/.../run.py` works right after ./scripts/demo or ./scripts/test."""
    try:
        import tenure  # noqa: F401
    except ModuleNotFoundError as missing:
        venv = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
        if venv.exists() and Path(sys.prefix).resolve() != venv.parent.parent.resolve():
            os.execv(venv, [str(venv), *sys.argv])
        sys.exit(
            f"{missing}: install tenure first (./scripts/demo creates .venv; "
            "then . .venv/bin/activate, or pip install -e .)"
        )


_use_the_projects_venv()

try:
    import httpx
    import uvicorn  # noqa: F401  (the servers below run on it)
    from a2a.client import ClientConfig, create_client
except ImportError as missing:
    raise SystemExit(
        f"this example needs the A2A extra ({missing}): pip install 'tenure[a2a]'"
    ) from None
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.helpers.proto_helpers import get_data_parts, get_message_text, new_text_message  # noqa: E402
from a2a.types import Role, SendMessageRequest, Task, TaskState  # noqa: E402

import tenure  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import remote  # noqa: E402  (beside this file)


def tenure_command() -> list[str]:
    found = shutil.which("tenure", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "tenure"]


def state(task: Task) -> str:
    return TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()


async def ask(url: str, text: str, task: Task | None = None) -> Task:
    """One message to the agent at ``url`` (a follow-up on ``task``); the task after."""
    message = new_text_message(text, role=Role.ROLE_USER)
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
        events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    return events[-1].task


def artifact(task: Task) -> object:
    """The task's artifact (a data part stores numbers as doubles: 3.0 shown as 3)."""
    value = get_data_parts(list(task.artifacts[-1].parts))[0]
    if isinstance(value, dict):
        return {
            k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in value.items()
        }
    return value


def serve_team(workdir: Path) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        *tenure_command(),
        "a2a",
        "serve",
        "--team",
        "front",
        "--store",
        f"sqlite:///{workdir / 'front.db'}",
        "--port",
        "0",
        "--exec",
        "python:agent:work",
        "--workers",
        "1",
        "--insecure",
    ]
    server = subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    if not url.startswith("http://"):
        server.kill()
        raise SystemExit(f"tenure a2a serve did not start (it printed {url!r})")
    return server, url


def part_one(workdir: Path) -> None:
    server, url = serve_team(workdir)
    try:
        print(f"1. team 'front' serves A2A at {url}")
        done = asyncio.run(ask(url, "count the words of this goal"))
        print(f"   task {done.id[:8]}: {state(done)}, artifact {artifact(done)}")
        asked = asyncio.run(ask(url, "ask me how to count"))
        print(f"   task {asked.id[:8]}: {state(asked)}: {get_message_text(asked.status.message)!r}")
        answered = asyncio.run(ask(url, "letters", task=asked))
        print(f"   answered 'letters': {state(answered)}, artifact {artifact(answered)}")
    finally:
        server.terminate()
        server.wait(timeout=10)


def part_two(workdir: Path) -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    agent = remote.server(sock)
    thread = threading.Thread(target=agent.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    try:
        print(f"2. a remote A2A agent at {url} works the plan's task (--exec a2a:URL)")
        store = f"sqlite:///{workdir / 'counting.db'}"
        ran = subprocess.run(
            [*tenure_command(), "run", str(HERE / "plan.yaml"), "--mode", "local", "--workers", "1"]
            + ["--exec", f"a2a:{url}", "--store", store],
            cwd=workdir,
            capture_output=True,
            text=True,
        )
        with tenure.open_store(store) as opened:
            (task,) = tenure.tasks(opened, "counting")
        artifact = (task.result or {}).get("artifact")
        print(
            f"   tenure run exited {ran.returncode}; task {task.task_id}: {task.state}, {artifact}"
        )
        return ran.returncode
    finally:
        agent.should_exit = True
        thread.join(timeout=10)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tenure-a2a-") as scratch:
        workdir = Path(scratch)
        part_one(workdir)
        return part_two(workdir)


if __name__ == "__main__":
    raise SystemExit(main())
