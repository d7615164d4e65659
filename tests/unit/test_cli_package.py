"""What a newcomer meets before any team runs: `tenure --version`, shell completion, a
help page whose examples name files that exist, the licence the package declares, and
examples that find the checkout's virtualenv on their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

import tenure
from tenure.console.cli import app

ROOT = Path(__file__).resolve().parents[2]


def tenure_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_version_prints_the_packages_version_and_exits_0() -> None:
    for flag in ("--version", "-V"):
        done = tenure_cli(flag)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"tenure {tenure.__version__}"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert tenure.__version__ == declared["project"]["version"]


def test_show_completion_prints_a_script_for_the_named_shell() -> None:
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "complete" in done.stdout and "tenure" in done.stdout


def _commands() -> Iterator[tuple[str, Any]]:
    root = typer.main.get_command(app)
    stack: list[tuple[str, Any]] = [("tenure", root)]
    while stack:
        name, command = stack.pop()
        yield name, command
        if isinstance(command, TyperGroup):
            stack += [(f"{name} {n}", c) for n, c in command.commands.items()]


def test_every_command_has_an_example_and_the_files_it_names_exist() -> None:
    for name, command in _commands():
        text = command.help or ""
        if isinstance(command, TyperGroup) and name != "tenure":
            continue  # a group's subcommands carry the examples
        assert "Example" in text or "example" in text, f"`{name} --help` has no example"
        for path in re.findall(r"\bexamples/[\w./-]+\w", text):
            assert (ROOT / path).exists(), f"`{name} --help` names {path}, which does not exist"


NAME = r"[A-Z][A-Z0-9_]*"
USAGE_PIECE = re.compile(rf"(\{{{NAME}\}}|{NAME}|\[{NAME}\])(\.\.\.)?")
"""An argument in a usage line: ``PLAN`` or ``{PLAN}`` (required, as the Typer release
renders it), ``[PLAN]`` (optional), each with ``...`` when repeatable."""


def test_every_usage_line_names_its_arguments_in_one_style() -> None:
    for name, command in _commands():
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        for argument in arguments:
            assert argument.metavar and re.fullmatch(NAME, argument.metavar), (
                f"`{name}`: argument {argument.name} has no uppercase metavar"
            )
        ctx = command.context_class(command, info_name=name)
        pieces = command.collect_usage_pieces(ctx)
        assert pieces[0] == "[OPTIONS]", name
        if isinstance(command, TyperGroup):
            assert " ".join(pieces[1:]) == "COMMAND [ARGS]...", name
            continue
        assert len(pieces) == 1 + len(arguments), (name, pieces)
        for piece in pieces[1:]:
            assert USAGE_PIECE.fullmatch(piece), f"`{name}` usage: {' '.join(pieces)}"


def test_the_declared_licence_is_the_licence_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0" in text
    assert "Programming Language :: Python :: 3.13" in project["classifiers"]
    assert project["urls"]


def test_an_example_run_with_a_python_lacking_tenure_says_how_to_install(tmp_path: Path) -> None:
    """A bare interpreter (no site-packages) and a copy of the example away from any
    .venv: one line saying what to do, not a traceback."""
    example = tmp_path / "examples" / "vendor-pricing"
    example.mkdir(parents=True)
    source = (ROOT / "examples" / "vendor-pricing" / "run.py").read_text(encoding="utf-8")
    (example / "run.py").write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-S", "-I", str(example / "run.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "install tenure first" in line and ".venv" in line


def test_old_flag_names_still_work_and_are_no_longer_shown(tmp_path: Path) -> None:
    for command, old, new in (
        ("run", "--ttl", "--lease-ttl"),
        ("demo", "--dir", "--workdir"),
        ("worker", "--id", "--member"),
        ("mcp", "--id", "--member"),
    ):
        page = tenure_cli(command, "--help").stdout
        assert new in page and f"{old} " not in page, f"`tenure {command} --help`"
    waits = tenure_cli("worker", "--id", "../w1", "--insecure", cwd=tmp_path)  # --member's check
    assert waits.returncode == 2 and "--member: " in waits.stderr
    refused = tenure_cli("leader", "--ttl", "0", cwd=tmp_path)  # reaches --lease-ttl's check
    assert refused.returncode == 2
    assert "--lease-ttl: a finite number of seconds from 0.5" in refused.stderr
    not_a_repo = tenure_cli("gc", "--repo", str(tmp_path), cwd=tmp_path)
    assert not_a_repo.returncode != 0 and "not a git repository" in not_a_repo.stderr
    assert "No such option" not in not_a_repo.stderr


def test_old_flags_are_renamed_only_before_a_double_dash() -> None:
    from tenure.console.aliases import renamed

    assert renamed("run", ["p.yaml", "--ttl=5", "--", "--ttl"]) == [
        "p.yaml",
        "--lease-ttl=5",
        "--",
        "--ttl",
    ]
    assert renamed("status", ["--ttl"]) == ["--ttl"]  # a command without old names
