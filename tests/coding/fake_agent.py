"""A fake coding-agent CLI for the tests: edits files as a per-task script says.

Usage: fake_agent.py CONFIG TASK_FILE RESULT_FILE. CONFIG is JSON:
``{"<task>": {"file": "m1.py", "modes": ["fix", "lie", ...]}}``; the mode for
attempt N is ``modes[N-1]`` (the last one repeats). Modes:
fix (write the fix), lie (change nothing, claim the tests pass), outside (fix and
also touch a file outside the scope), conflict (write ``shared.py`` with this task's
id), append (append this task's line to ``shared.py``), hang (sleep past any
deadline), die (write half a change, then kill itself), switch (fix, then check out
another branch), selfcommit (fix and commit it itself, as aider does), quiet (fix, but
write a report with no Verification section), qa (fix only once the task
file's Q&A section says "return 1": an answer from the operator), waitfor (wait until
the file ``spec["path"]`` exists, then fix). Attacks of a hostile agent (hooks,
fsmonitor, exclude, ignored, checkout, integration, resultlink, symlink, gitfile)
are in ``evil_agent.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import evil_agent  # run as a script: its folder is on sys.path


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    task_file, result_file = Path(sys.argv[2]), Path(sys.argv[3])
    task = os.environ["TENURE_TASK_ID"]
    attempt = int(os.environ["TENURE_ATTEMPT"])
    assert Path.cwd() == Path(os.environ["TENURE_WORKTREE"])
    assert task_file.exists(), task_file
    spec = config[task]
    modes = spec["modes"]
    mode = modes[min(attempt, len(modes)) - 1]
    print(f"fake agent: {task} attempt {attempt} mode {mode} port {os.environ['TENURE_PORT_BASE']}")
    target = Path(spec.get("file", "shared.py"))
    if evil_agent.attack(mode, spec, target, result_file):
        return
    report = f"## Changed\n\n{target}\n\n## Verification\n\nran the checks: all pass\n"
    if mode == "fix":
        target.write_text("def value():\n    return 1\n")
    elif mode == "lie":
        pass
    elif mode == "outside":
        target.write_text("def value():\n    return 1\n")
        Path("README.txt").write_text("touched by an agent that ignores its scope\n")
    elif mode == "conflict":
        Path("shared.py").write_text(f"OWNER = {task!r}\n")
    elif mode == "append":
        with Path("shared.py").open("a") as fh:
            fh.write(f"ALSO_{task.upper()} = True\n")
    elif mode == "hang":
        target.write_text("def value():\n    return 1\n")  # a change made before hanging
        time.sleep(600)
    elif mode == "die":
        target.write_text("def value():\n    return 1  # half done\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "switch":
        target.write_text("def value():\n    return 1\n")
        subprocess.run(["git", "checkout", "-q", "-b", f"elsewhere-{task}"], check=True)
    elif mode == "selfcommit":
        target.write_text("def value():\n    return 1\n")
        git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
        subprocess.run([*git, "commit", "-qam", "agent's own commit"], check=True)
    elif mode == "qa":
        answers = task_file.read_text().partition("Questions and answers")[2]
        if "return 1" in answers:
            target.write_text("def value():\n    return 1\n")
    elif mode == "waitfor":
        deadline = time.monotonic() + 120
        while not Path(spec["path"]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        target.write_text("def value():\n    return 1\n")
    elif mode == "quiet":
        target.write_text("def value():\n    return 1\n")
        report = f"## Changed\n\n{target}\n"
    elif mode == "sleep":
        time.sleep(float(spec.get("seconds", 0.5)))
        target.write_text("def value():\n    return 1\n")
    result_file.write_text(report)


if __name__ == "__main__":
    main()
