"""A reader opening and closing a SQLite store never costs the live members their writes.

Closing any descriptor of a SQLite file drops every POSIX lock the process holds on
it. A member that did so (an identity check reading the file's header) let the next
process closing its connection delete the write-ahead log under it: the leader's
lease renewals and every later write went to a deleted file, so the lease lapsed in
everyone else's eyes while the leader thought it held it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tenure.store import open_store

SLOW = "import json, sys, time; json.load(sys.stdin); time.sleep(6); print(json.dumps({}))"


def tenure(cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "TENURE_STORE"}
    return subprocess.Popen(
        [sys.executable, "-m", "tenure", *args], cwd=cwd, env=env, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_readers_opening_and_closing_the_store_leave_the_lease_renewed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    (tmp_path / "slow.py").write_text(SLOW)
    plan = {"team": "demo", "tasks": [{"id": "slow", "goal": "take six seconds"}]}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    members = [
        tenure(tmp_path, "leader", "plan.yaml", "--store", url, "--insecure", "--member", "lead"),
        tenure(
            tmp_path, "worker", "--store", url, "--team", "demo", "--insecure", "--member", "w1",
            "--exec", f"command:{sys.executable} {tmp_path / 'slow.py'}",
        ),
    ]  # fmt: skip
    try:
        expiries = []
        deadline = time.monotonic() + 60
        while len(expiries) < 50 and time.monotonic() < deadline:
            with open_store(url) as reader:  # `tenure status`, say: opened and closed
                lease = reader.current_lease("demo")
                if lease is not None or expiries:
                    expiries.append(lease.expires_at if lease else None)
            time.sleep(0.1)
        assert None not in expiries  # the lease never lapsed: every renewal was seen
        assert expiries[-1] > expiries[0] + 2  # and it was renewed while the task ran
        leader_code = members[0].wait(timeout=60)
        assert leader_code == 0, members[0].communicate()
    finally:
        for member in members:
            member.kill()
            member.communicate()
    with open_store(url) as reader:
        assert reader.get_task("demo", "slow").state == "done"
