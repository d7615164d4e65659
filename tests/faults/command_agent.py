"""A command executor for the orphan scenario (``command:python3 command_agent.py``).

It reads the envelope on stdin, notes its own pid and the pid of the helper it starts
in ``TENURE_FAULTS_CHILDREN`` (one JSON line per attempt), and has the helper — a
grandchild of the worker, in a session of its own (out of the command's group, as a
daemon would be) — sleep and then append the ledger line: the effect an orphan could
finish after its worker died.
Each line carries the ``TENURE_IDEMPOTENCY_KEY`` the command saw and the envelope's
key. On success it prints a result artifact naming the line.

Configured by ``TENURE_FAULTS_LEDGER``, ``TENURE_FAULTS_SLEEP`` (seconds) and
``TENURE_FAULTS_CHILDREN``, which the worker passes with ``--pass-env TENURE_FAULTS_*``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any


def _append(path: str, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def helper(record_json: str) -> None:
    """The grandchild: sleep, then write the effect."""
    time.sleep(float(os.environ.get("TENURE_FAULTS_SLEEP", "0.2")))
    record = json.loads(record_json)
    _append(os.environ["TENURE_FAULTS_LEDGER"], {**record, "time": time.time()})


def main() -> None:
    envelope = json.load(sys.stdin)
    record = {
        "task_id": envelope["task_id"],
        "attempt": envelope["attempt"],
        "epoch": envelope["epoch"],
        "worker": os.environ.get("TENURE_WORKER", ""),
        "envelope_key": envelope["idempotency_key"],
        "env_key": os.environ.get("TENURE_IDEMPOTENCY_KEY"),
        "pid": os.getpid(),
    }
    # the helper moves to a session of its own, out of the command's group, as a
    # daemonizing tool would: only its environment still says whose it is
    child = subprocess.Popen(
        [sys.executable, __file__, "--helper", json.dumps(record)], start_new_session=True
    )
    _append(
        os.environ["TENURE_FAULTS_CHILDREN"],
        {**record, "helper": child.pid, "pgid": os.getpgid(0)},
    )
    code = child.wait()
    if code != 0:
        sys.exit(code)
    print(json.dumps({"status": "completed", "artifact": {"task_id": record["task_id"]}}))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--helper":
        helper(sys.argv[2])
    else:
        main()
