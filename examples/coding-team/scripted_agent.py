"""A scripted coding agent (no API key): reads its task file, applies the known fix for
the one file in its scope, and writes its report where the leader asked.

Usage (as a --agent template): script:python3 scripted_agent.py {task_file} {result_file}
Set SCRIPTED_AGENT_SECONDS to make it take a fixed time (the benchmark does).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

FIXES = Path(__file__).resolve().parent / "fixes"


def main() -> None:
    task_file, result_file = Path(sys.argv[1]), Path(sys.argv[2])
    task = task_file.read_text()
    time.sleep(float(os.environ.get("SCRIPTED_AGENT_SECONDS", "0")))
    scope = re.findall(r"^- `([^`]+)`", task.split("## Scope", 1)[1], re.M)[0]
    shutil.copy(FIXES / Path(scope).name, scope)  # cwd is the worktree
    print(f"fixed {scope} in {os.getcwd()} (ports from {os.environ['TENURE_PORT_BASE']})")
    result_file.write_text(
        f"## Changed\n\n- {scope}: replaced the buggy implementation\n\n"
        "## Verification\n\n- not run by this scripted agent (the leader runs the checks)\n\n"
        "## Open questions\n\n- none\n\n## Blast radius\n\n"
        f"- callers of {Path(scope).stem}\n"
    )


if __name__ == "__main__":
    main()
