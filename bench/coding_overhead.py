"""Coding teams: orchestration overhead per task, and the speed-up of parallel workers.

    .venv/bin/python bench/coding_overhead.py [--tasks 8] [--agent-seconds 1.0] [--repeat 3]

1. Steps, each timed on its own (median of N): ``git worktree add`` of a fresh branch,
   the worker's commit of the agent's change, the scope diff, one leader-run check
   (``python3 -c``), and a ``--no-ff`` merge into the integration branch.
2. End to end, an agent that takes no time: the wall clock of a whole run divided by
   its tasks = what the leader adds per task (dispatch/return commits, worktree,
   agent process start, checks, merge, final integration checks).
3. Speed-up: a plan of independent tasks whose scripted agent sleeps a fixed time,
   run with 1, 2 and 4 workers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenure.executors import git
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.worktrees import Worktrees
from tenure.protocol import CommandCheck, Plan
from tenure.roles.coding import CodingConfig, CodingLeader
from tenure.verify.checks import check_command

AGENT = """
import os, sys, time
from pathlib import Path
time.sleep(float(os.environ.get("BENCH_AGENT_SECONDS", "0")))
task = os.environ["TENURE_TASK_ID"]
Path(f"{task}.py").write_text("def value():\\n    return 1\\n")
Path(sys.argv[1]).write_text("## Changed\\n\\n" + task + ".py\\n")
"""


def make_repo(root: Path, tasks: int) -> Path:
    repo = root / "repo"
    repo.mkdir(parents=True)
    git.git(repo, "init", "-q", "-b", "main")
    for i in range(tasks):
        (repo / f"m{i}.py").write_text("def value():\n    return 0\n")
    git.commit_all(repo, "initial")
    return repo


def make_plan(tasks: int) -> Plan:
    return Plan.model_validate(
        {
            "team": "bench",
            "tasks": [
                {
                    "id": f"m{i}",
                    "goal": f"make m{i}.value() return 1",
                    "scope": [f"m{i}.py"],
                    "checks": [
                        {"kind": "command", "run": f"python3 -c 'import m{i}; assert m{i}.value()'"}
                    ],
                }
                for i in range(tasks)
            ],
        }
    )


def run_plan(tasks: int, workers: int, agent_seconds: float, agent_file: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), tasks)
        cli = AgentCLI.from_spec(f"script:{sys.executable} {agent_file} {{result_file}}")
        cli.env["BENCH_AGENT_SECONDS"] = str(agent_seconds)
        leader = CodingLeader(
            CodingConfig(repo=repo, plan=make_plan(tasks), agent=cli, workers=workers, run_id="b")
        )
        started = time.perf_counter()
        outcome = leader.run()
        elapsed = time.perf_counter() - started
        assert outcome.done, outcome.reason
        return elapsed


def median_ms(fn: Callable[[int], None], repeat: int) -> float:
    times = []
    for n in range(repeat):
        started = time.perf_counter()
        fn(n)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def steps(repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), 1)
        trees = Worktrees(repo, "s")
        git.worktree_add(repo, trees.root / "integration", "tenure/s/integration", "main")
        integ = trees.root / "integration"
        made = []

        def add(n: int) -> None:
            made.append(trees.create("t", n, "main", 0))

        def commit(n: int) -> None:
            path = made[n].path
            (path / f"f{n}.py").write_text(f"X = {n}\n")
            git.commit_all(path, f"attempt {n}")

        def diff(n: int) -> None:
            git.changed_files(made[n].path, made[n].base, "HEAD")

        check = CommandCheck(run="python3 -c 'import m0'")

        def run_check(n: int) -> None:
            assert check_command(check, made[n].path).passed

        def merge(n: int) -> None:
            merged, report = git.merge(integ, made[n].branch, f"merge {n}")
            assert merged, report

        return {
            "worktree add": median_ms(add, repeat),
            "worker commit": median_ms(commit, repeat),
            "scope diff": median_ms(diff, repeat),
            "leader check (python3 -c)": median_ms(run_check, repeat),
            "merge --no-ff": median_ms(merge, repeat),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description="coding-team overhead and speed-up")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--agent-seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent_file = Path(tmp) / "agent.py"
        agent_file.write_text(AGENT)
        result: dict[str, Any] = {
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, "
            + subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
            "steps_ms": steps(max(args.repeat, 5)),
        }
        zero = [run_plan(args.tasks, 1, 0.0, agent_file) for _ in range(args.repeat)]
        result["per_task_ms_zero_time_agent_1_worker"] = statistics.median(zero) / args.tasks * 1000
        speed: dict[int, float] = {}
        for workers in (1, 2, 4):
            runs = [
                run_plan(args.tasks, workers, args.agent_seconds, agent_file)
                for _ in range(args.repeat)
            ]
            speed[workers] = statistics.median(runs)
        result["speedup"] = {
            str(w): {"wall_s": round(s, 2), "speedup": round(speed[1] / s, 2)}
            for w, s in speed.items()
        }
        result["tasks"] = args.tasks
        result["agent_seconds"] = args.agent_seconds
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(result["machine"])
    for name, ms in result["steps_ms"].items():
        print(f"  {name:<28} {ms:7.1f} ms")
    per_task = result["per_task_ms_zero_time_agent_1_worker"]
    print(f"  end to end per task (zero-time agent, 1 worker): {per_task:.0f} ms")
    ideal = args.tasks * args.agent_seconds
    print(
        f"{args.tasks} independent tasks, agent {args.agent_seconds:g}s each (serial {ideal:g}s):"
    )
    for w, row in result["speedup"].items():
        print(f"  {w} worker(s): {row['wall_s']:.2f}s  speed-up x{row['speedup']:.2f}")


if __name__ == "__main__":
    main()
