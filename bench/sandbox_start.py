"""Coding agents: what the bubblewrap sandbox adds to an agent's start.

    .venv/bin/python bench/sandbox_start.py [--runs 30] [--json]

A trivial agent (``true``) is run N times through ``AgentCLI.run`` in a real
attempt worktree, unsandboxed (``sandbox="off"``) and in bubblewrap
(``sandbox="bwrap"``), alternating so that both see the same machine. Two
figures per run: the agent process alone (start to exit, ``AgentRun.seconds``:
for bwrap this includes building the sandbox) and the whole call (home and log
set up, the process, the worker's ``git add``/commit check afterwards). Median,
range and the ratio sandboxed / unsandboxed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tenure.executors import git
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.sandbox import SandboxMode, bwrap_problem
from tenure.executors.worktrees import Worktrees, exclude_tenure_dir


def make_tree(root: Path) -> tuple[Path, Worktrees]:
    repo = root / "repo"
    repo.mkdir(parents=True)
    git.git(repo, "init", "-q", "-b", "main")
    (repo / "m.py").write_text("def value():\n    return 0\n")
    git.commit_all(repo, "initial")
    exclude_tenure_dir(repo)
    return repo, Worktrees(repo, "bench")


def one(repo: Path, trees: Worktrees, mode: SandboxMode, n: int) -> tuple[float, float]:
    tree = trees.create("t", n, "HEAD", 0)
    agent = AgentCLI("true", ["true"], sandbox=mode)
    attempt = repo / ".tenure" / "attempts" / "bench" / f"t-{n}"
    started = time.perf_counter()
    run = agent.run(
        worktree=tree.path,
        task_file=tree.path / "m.py",
        result_file=tree.path / ".tenure" / "result-t.md",
        attempt_dir=attempt,
        deadline_seconds=60,
        extra_env=tree.env(),
        commit_message="bench",
        dirs=tree.dirs,
        protect=[repo, tree.dirs.common_dir],
    )
    whole = time.perf_counter() - started
    assert run.exit_code == 0 and run.sandboxed == (mode == "bwrap"), run
    return run.seconds, whole


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(values) * 1000, 2),
        "min_ms": round(min(values) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    problem = bwrap_problem()  # probed once per process (cached); timed below on its own
    if problem is not None:
        raise SystemExit(f"cannot compare: {problem}")
    probe_started = time.perf_counter()
    bwrap_problem.cache_clear()
    bwrap_problem()
    probe = time.perf_counter() - probe_started
    found: dict[str, dict[str, list[float]]] = {
        m: {"process": [], "call": []} for m in ("off", "bwrap")
    }
    with tempfile.TemporaryDirectory(prefix="tenure-bench-sandbox-") as tmp:
        repo, trees = make_tree(Path(tmp))
        modes: tuple[SandboxMode, SandboxMode] = ("off", "bwrap")
        for n in range(1, 3):  # warm-up: page cache, the first fork of each
            one(repo, trees, modes[n % 2], 1000 + n)
        for n in range(1, args.runs + 1):
            for mode in modes if n % 2 else modes[::-1]:
                process, call = one(repo, trees, mode, n * 2 + (mode == "bwrap"))
                found[mode]["process"].append(process)
                found[mode]["call"].append(call)
    figures: dict[str, Any] = {
        "runs": args.runs,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "bwrap_version": subprocess.run(
            ["bwrap", "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "probe_ms": round(probe * 1000, 2),
    }
    for mode, series in found.items():
        figures[mode] = {what: summary(values) for what, values in series.items()}
    for what in ("process", "call"):
        figures[f"ratio_{what}"] = round(
            statistics.median(found["bwrap"][what]) / statistics.median(found["off"][what]), 2
        )
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
        return
    print(f"{args.runs} runs each of `true` through AgentCLI ({figures['bwrap_version']})")
    print(f"{'':<22}{'median ms':>10}{'min':>8}{'max':>8}")
    for mode in ("off", "bwrap"):
        for what in ("process", "call"):
            s = figures[mode][what]
            label = f"{'unsandboxed' if mode == 'off' else 'bwrap'} {what}"
            print(f"{label:<22}{s['median_ms']:>10}{s['min_ms']:>8}{s['max_ms']:>8}")
    print(f"ratio bwrap/unsandboxed: process x{figures['ratio_process']}, call x{figures['ratio_call']}")
    print(f"sandbox probe (once per process): {figures['probe_ms']} ms")


if __name__ == "__main__":
    main()
