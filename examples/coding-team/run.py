"""Run the coding-team example: copy project/ into a fresh git repository, then let
`tenure code` fix its three failing tests in parallel.

    python examples/coding-team/run.py                    # scripted agents, no API key
    python examples/coding-team/run.py --agent claude     # the same plan with Claude Code
    python examples/coding-team/run.py --dir /tmp/textkit --workers 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
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

HERE = Path(__file__).resolve().parent


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(target: Path) -> Path:
    shutil.copytree(HERE / "project", target, ignore=shutil.ignore_patterns("__pycache__"))
    git(target, "init", "-q", "-b", "main")
    git(target, "-c", "user.name=example", "-c", "user.email=example@localhost", "add", "-A")
    git(
        target,
        "-c",
        "user.name=example",
        "-c",
        "user.email=example@localhost",
        "commit",
        "-q",
        "-m",
        "textkit with three failing tests",
    )
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="scripted", help="scripted, claude, codex, aider, ...")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to create the repository")
    parser.add_argument(
        "--isolate-home",
        action="store_true",
        help="give a real agent a fresh config dir per attempt (then set its API key)",
    )
    args = parser.parse_args()
    target = args.dir or Path(tempfile.mkdtemp(prefix="tenure-coding-")) / "textkit"
    repo = make_repo(target)
    failing = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=repo, capture_output=True, text=True
    )
    print(f"repository {repo}: tests fail before the run ({failing.stderr.splitlines()[-1]})")
    agent = args.agent
    if agent == "scripted":
        agent = (
            f"script:{sys.executable} {HERE / 'scripted_agent.py'} {{task_file}} {{result_file}}"
        )
    argv = [
        sys.executable, "-m", "tenure", "code", str(HERE / "plan.yaml"),
        "--workdir", str(repo), "--agent", agent, "--workers", str(args.workers), "--run", "demo",
    ]  # fmt: skip
    if args.agent == "scripted":
        argv += ["--pass-env", "SCRIPTED_AGENT_SECONDS"]  # agents get an allowlisted env
    if args.agent != "scripted" and not args.isolate_home:
        argv.append("--share-home")  # a real agent CLI uses your login
    code = subprocess.run(argv).returncode
    if code == 0:
        git(repo, "merge", "-q", "--no-edit", "tenure/demo/integration")
        ok = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=repo).returncode == 0
        print(f"merged into main; the whole suite {'passes' if ok else 'FAILS'}")
        print(f"read the run: cat {repo}/.tenure/runs/demo/status.yml; git -C {repo} log --graph")
        store = f"sqlite:///{repo / '.tenure' / 'state.db'}"
        print(f"its register and events: tenure status --store {store} --team code/demo")
        return 0 if ok else 1
    return code


if __name__ == "__main__":
    sys.exit(main())
