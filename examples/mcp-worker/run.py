"""Run the mcp-worker example: a leader, and a member whose work is done by an agent
over MCP (`tenure mcp`), with the operator answering the agent's question.

    python examples/mcp-worker/run.py            # a fresh directory each run
    python examples/mcp-worker/run.py --dir DIR  # or this one (emptied first)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
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

import anyio  # noqa: E402

import tenure  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scripted_agent import work  # noqa: E402

TEAM, MEMBER = "mcp-demo", "agent-1"


def tenure_cli(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tenure", *args], **kwargs)  # type: ignore[call-overload]


def operator(url: str, keys: Path, stop: threading.Event) -> None:
    """The person at the inbox: answers the agent's question with EUR (signed with the
    team's lead key, as the leader accepts only that)."""
    with tenure.open_store(url) as store:
        while not stop.wait(0.1):
            for item in tenure.inbox(store, [TEAM]):
                print(f"operator: {item.task.task_id} asks {item.why!r}; answering EUR")
                tenure.answer(store, TEAM, item.task.task_id, "EUR", keys=keys)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where the team keeps its store and keys")
    args = parser.parse_args()
    work_dir = args.dir or Path(tempfile.mkdtemp(prefix="tenure-mcp-"))
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    url, keys = f"sqlite:///{work_dir / 'state.db'}", str(work_dir / "keys")
    common = ["--store", url, "--keys", keys]
    init = tenure_cli("keys", "init", "--team", TEAM, "--member", MEMBER, "--keys", keys,
                      stdout=subprocess.DEVNULL)  # fmt: skip
    if init.wait() != 0:
        return 1
    leader = tenure_cli("leader", str(HERE / "plan.yaml"), *common, "--keep-running",
                        "--member", "lead-1", "--state-dir", str(work_dir / "lead"))  # fmt: skip
    stop = threading.Event()
    person = threading.Thread(target=operator, args=(url, Path(keys), stop), daemon=True)
    person.start()
    server = ["mcp", "--team", TEAM, "--member", MEMBER, *common,
              "--state-dir", str(work_dir / "member")]  # fmt: skip
    try:
        anyio.run(work, server)
        with tenure.open_store(url) as store:
            for _ in range(100):
                state = {t.task_id: t.state for t in tenure.tasks(store, TEAM)}
                if state.get("summary") == "done":
                    break
                time.sleep(0.1)
            print(f"register: {state}; accepted artifact: {tenure.results(store, TEAM)}")
    finally:
        stop.set()
        leader.terminate()
        leader.wait(timeout=30)
    print(f"inspect it again with: tenure status --store {url}")
    return 0 if state.get("summary") == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
