"""Secrets with real processes: what a child's environment holds, what members' command
lines show, that a secret a worker echoes ends up nowhere Tenure keeps or shows (on
SQLite and Redis), and that what workers write cannot drive the operator's terminal."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import redis_or_skip, url_for
from tenure.executors import CommandExecutor, TaskContext, git
from tenure.executors.agent_cli import PRESET_KEYS, AgentCLI
from tenure.protocol import CommandCheck, Plan, TaskEnvelope, idempotency_key
from tenure.roles import LocalTeam
from tenure.store import open_store
from tenure.verify.checks import check_command

API_KEY = "sk-trust-5f3c9a71e2d4b8c6"  # the team process's OPENAI_API_KEY
MEMBER_KEY = "member-key-7d2e91ab55"  # a member's TENURE_KEY_*
STORE_PW = "store-pw-4b8e2c19aa"  # the Redis store URL's password
FORBIDDEN_NAMES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TENURE_STORE", "TENURE_KEY")
NASTY = "\x1b[31mRED\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ [bold red]LOUD[/] a\rb"


def envelope(task_id: str = "t1") -> TaskEnvelope:
    return TaskEnvelope.model_validate(
        {
            "task_id": task_id,
            "idempotency_key": idempotency_key(task_id, 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "w1",
            "deadline_seconds": 30,
            "goal": "dump the environment",
            "acceptance_criteria": ["it ran"],
        }
    )


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's environment: model keys, a member key, a store URL with a password."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-trust-0c1d2e3f4a5b")
    monkeypatch.setenv("TENURE_KEY_LEADER", MEMBER_KEY)
    monkeypatch.setenv("TENURE_STORE", f"redis://:{STORE_PW}@127.0.0.1:6379/15")
    monkeypatch.setenv("TENURE_MODEL", "openai:gpt-4.1")
    monkeypatch.setenv("EXTRA_SETTING", "passed-on")
    monkeypatch.setenv("NOT_PASSED", "kept-back")
    monkeypatch.setenv("TENURE_ENV_ALLOW", "EXTRA_SETTING")


def assert_clean_env(text: str) -> None:
    for value in (API_KEY, MEMBER_KEY, STORE_PW, "kept-back", "TENURE_MODEL"):
        assert value not in text
    names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
    for name in FORBIDDEN_NAMES:
        assert not any(n.startswith(name) for n in names), name
    assert "PATH=" in text and "EXTRA_SETTING=passed-on" in text


# --- the environment of every child -------------------------------------------------------


@pytest.mark.usefixtures("secret_env")
def test_a_command_executor_that_dumps_its_environment_shows_no_key_and_no_store(
    tmp_path: Path,
) -> None:
    dump = tmp_path / "env.txt"
    executor = CommandExecutor(["sh", "-c", f'env > {dump}; echo \'{{"status": "completed"}}\''])
    result = executor.execute(envelope(), TaskContext("w1", "team"))
    assert result.status == "completed"
    text = dump.read_text()
    assert_clean_env(text)
    assert "TENURE_TASK_ID=t1" in text and "TENURE_WORKER=w1" in text


@pytest.mark.usefixtures("secret_env")
def test_a_command_check_that_dumps_its_environment_shows_no_key_and_no_store(
    tmp_path: Path,
) -> None:
    verdict = check_command(CommandCheck(run="env"), tmp_path)
    assert verdict.passed
    assert_clean_env(str(verdict.evidence["output"]))


@pytest.mark.usefixtures("secret_env")
def test_an_agent_cli_gets_its_provider_key_only_and_a_script_agent_none(tmp_path: Path) -> None:
    def run(cli: AgentCLI, name: str) -> str:
        dump = tmp_path / f"{name}.env"
        cli.template = ["sh", "-c", f"env > {dump}"]
        outcome = cli.run(
            worktree=tmp_path,
            task_file=tmp_path / "task.md",
            result_file=tmp_path / "result.md",
            attempt_dir=tmp_path / "attempts" / name,
            deadline_seconds=30,
            extra_env={"TENURE_TASK_ID": "t1"},
            commit_message="unused",
        )
        assert outcome.exit_code == 0, outcome.reason
        return dump.read_text()

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    claude = run(AgentCLI.from_spec("claude"), "claude")
    assert PRESET_KEYS["claude"] == ("ANTHROPIC_API_KEY",)
    assert "ANTHROPIC_API_KEY=sk-ant-trust" in claude
    assert API_KEY not in claude and MEMBER_KEY not in claude and STORE_PW not in claude
    script = run(AgentCLI.from_spec("script:true"), "script")
    assert "ANTHROPIC_API_KEY" not in script
    assert_clean_env(script)
    assert oct((tmp_path / "attempts" / "script").stat().st_mode & 0o777) == oct(0o700)


@pytest.mark.usefixtures("secret_env")
def test_a_repository_hook_never_runs_under_tenures_git_whose_env_has_no_key(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    dump = tmp_path / "hook.env"
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\nenv > {dump}\n")
    hook.chmod(0o755)
    (repo / "f.txt").write_text("x\n")
    assert git.commit_all(repo, "a commit")
    assert not dump.exists()  # hooks are off for every git command Tenure runs
    assert_clean_env("\n".join(f"{k}={v}" for k, v in git.safe_env().items()))


# --- members' command lines ------------------------------------------------------------------

ARGV_AGENT = """\
import json, os, sys, time
from pathlib import Path
env = json.load(sys.stdin)
here = Path(os.environ["SPY_DIR"])
(here / f"{env['task_id']}.ppid").write_text(str(os.getppid()))
deadline = time.time() + 30
while not (here / "release").exists() and time.time() < deadline:
    time.sleep(0.05)
(here / f"{env['task_id']}.env").write_text(json.dumps(dict(os.environ)))
print(json.dumps({"status": "completed", "artifact": {"ok": True}}))
"""


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_tenure_run_gives_its_workers_the_store_url_in_their_environment_not_their_argv(
    tmp_path: Path,
) -> None:
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs /proc to read other processes' command lines")
    base = redis_or_skip()
    url = base.replace("redis://", f"redis://:{STORE_PW}@", 1)
    spy = tmp_path / "spy"
    spy.mkdir()
    (tmp_path / "agent.py").write_text(ARGV_AGENT)
    plan = {"team": "argv", "tasks": [{"id": "a", "goal": "wait"}, {"id": "b", "goal": "wait"}]}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    env = {
        **os.environ,
        "TENURE_STORE": url,
        "SPY_DIR": str(spy),
        "TENURE_ENV_ALLOW": "SPY_DIR",
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tenure",
            "run",
            str(tmp_path / "plan.yaml"),
            "--workers",
            "2",
            "--exec",
            f"command:{sys.executable} {tmp_path / 'agent.py'}",
            "--workdir",
            str(tmp_path),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(spy.glob("*.ppid"))) < 2 and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()[0]
            time.sleep(0.05)
        ppids = {int(p.read_text()) for p in spy.glob("*.ppid")}
        assert len(ppids) == 2, "both workers run a task at once"
        lines = [cmdline(pid) for pid in ppids]  # the workers, while they run
        lines.append(cmdline(run.pid))
        for line in lines:
            assert STORE_PW not in line and "--store" not in line, line
        assert all(" worker " in line for line in lines[:2])
        for pid in ppids:  # the store URL reaches the worker through its environment
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"TENURE_STORE={url}".encode() in environ
    finally:
        (spy / "release").write_text("")
        output, _ = run.communicate(timeout=60)
    assert run.returncode == 0, output
    assert STORE_PW not in output
    for dump in spy.glob("*.env"):
        seen = json.loads(dump.read_text())
        assert "TENURE_STORE" not in seen and STORE_PW not in dump.read_text()


# --- a secret a worker echoes goes nowhere ------------------------------------------------

ECHO_AGENT = """\
import json, os, sys
from pathlib import Path
env = json.load(sys.stdin)
here = Path(os.environ["SPY_DIR"])
(here / f"{env['task_id']}-{env['attempt']}.json").write_text(json.dumps(env))
secret = (here / "secret.txt").read_text().strip()  # read from a file, not the environment
if env["task_id"] == "ask":
    print(json.dumps({"status": "blocked", "question": f"may I use {secret}?"}))
elif env["attempt"] == 1:
    print(f"connecting with {secret} failed", file=sys.stderr)
    sys.exit(1)
else:
    print(json.dumps({
        "status": "completed",
        "artifact": {"seen": secret, "input": env["input"]},
        "notes": {"changed": [f"used {secret}"]},
        "evidence": [{"kind": "command", "command": f"login {secret}", "exit_code": 0, "output": secret}],
    }))
"""


def echo_plan(secrets: list[str], spy: Path) -> Plan:
    """An echo task (the secret in its goal and input, a check that prints it) and a task
    whose question carries it."""
    return Plan.model_validate(
        {
            "team": "secrets",
            "max_attempts": 2,
            "tasks": [
                {
                    "id": "echo",
                    "goal": f"log in with {secrets[0]}",
                    "input": {"token": secrets[0], "also": secrets[1:]},
                    "checks": [{"kind": "command", "run": f"cat {spy / 'secret.txt'}"}],
                },
                {"id": "ask", "goal": "ask first"},
            ],
        }
    )


def dump_sqlite(path: Path) -> str:
    rows: list[str] = []
    with closing(sqlite3.connect(path)) as conn, conn:  # closed, and committed
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            rows += [repr(row) for row in conn.execute(f"SELECT * FROM {table}")]  # noqa: S608
    raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    return "\n".join(rows) + raw.decode("latin-1")


def dump_redis(url: str) -> str:
    import redis

    from tenure.store.redis.connection import parse_url

    target = parse_url(url)
    client = redis.Redis.from_url(target.client_url, decode_responses=True)
    out: list[str] = []
    try:
        for key in client.scan_iter(match=f"{target.prefix}:*", count=1000):
            kind = client.type(key)
            if kind == "string":
                out.append(str(client.get(key)))
            elif kind == "hash":
                out.append(repr(client.hgetall(key)))
            elif kind == "list":
                out.append(repr(client.lrange(key, 0, -1)))
            elif kind == "set":
                out.append(repr(client.smembers(key)))
            elif kind == "zset":
                out.append(repr(client.zrange(key, 0, -1, withscores=True)))
            elif kind == "stream":
                out.append(repr(client.xrange(key)))
            else:
                out.append(f"{key}: {kind}")
            out.append(key)
    finally:
        client.close()
    assert out, "the store holds something"
    return "\n".join(out)


def tenure_cli(cwd: Path, url: str, *args: str) -> str:
    """The operator's commands, in a process that does not know the model key."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TENURE_STORE")}
    env.update(COLUMNS="250", NO_COLOR="1", TERM="dumb", TENURE_STORE=url)
    proc = subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_secret_a_worker_echoes_is_nowhere_in_the_store_the_cli_or_the_next_envelope(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("TENURE_KEY_LEADER", MEMBER_KEY)
    url = url_for(backend, tmp_path)
    secrets = [API_KEY, MEMBER_KEY]
    if backend == "redis":
        url = url.replace("redis://", f"redis://:{STORE_PW}@", 1)
        secrets.append(STORE_PW)
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "secret.txt").write_text(" ".join(secrets))
    (tmp_path / "agent.py").write_text(ECHO_AGENT)
    monkeypatch.setenv("SPY_DIR", str(spy))
    monkeypatch.setenv("TENURE_ENV_ALLOW", "SPY_DIR")
    plan = echo_plan(secrets, spy)
    executor = CommandExecutor([sys.executable, str(tmp_path / "agent.py")])
    with open_store(url) as store:
        outcome = LocalTeam(store, plan, executor, workers=2, state_dir=tmp_path / "st").run()
        assert outcome == "settled"
        states = {t.task_id: t.state for t in store.tasks("secrets")}
        assert states == {"echo": "done", "ask": "blocked"}
        kept = dump_sqlite(Path(url.removeprefix("sqlite:///"))) if backend == "sqlite" else ""
        if backend == "redis":
            kept = dump_redis(url)
    assert "***" in kept
    shown = "\n".join(
        tenure_cli(tmp_path, url, *args)
        for args in (
            ["log", "--team", "secrets"],
            ["log", "--json"],
            ["inbox"],
            ["status"],
            ["decisions", "--team", "secrets"],
        )
    )
    assert "may I use ***" in shown and "verify.verdict" in shown
    first = (spy / "echo-1.json").read_text()
    second = json.loads((spy / "echo-2.json").read_text())
    assert second["history"] and "***" in second["history"][0]["failure"]
    for secret in secrets:
        for where, text in (("store", kept), ("cli", shown), ("envelope", first)):
            assert secret not in text, f"{secret} in {where}"
        assert secret not in json.dumps(second)


# --- what workers write cannot drive the terminal ---------------------------------------------

NASTY_AGENT = """\
import json, sys
env = json.load(sys.stdin)
nasty = json.loads({nasty!r})
if env["task_id"] == "ask":
    print(json.dumps({{"status": "blocked", "question": "question " + nasty}}))
elif env["task_id"] == "fail":
    print("failure " + nasty, file=sys.stderr)
    sys.exit(1)
else:
    print(json.dumps({{"status": "completed", "artifact": {{"said": nasty}}}}))
"""


def assert_escaped(output: str) -> None:
    for char in ("\x1b", "\r", "\x07"):
        assert char not in output, repr(output[:2000])
    assert "\\x1b[31mRED" in output  # shown, not obeyed
    assert "[bold red]LOUD" in output  # printed as written, not taken for a style


def test_worker_text_with_escapes_links_and_markup_prints_escaped_in_every_command(
    tmp_path: Path,
) -> None:
    (tmp_path / "agent.py").write_text(NASTY_AGENT.format(nasty=json.dumps(NASTY)))
    check = f"{sys.executable} -c \"import sys; print('check ' + {NASTY!r}); sys.exit(1)\""
    plan = {
        "team": "nasty",
        "max_attempts": 1,
        "tasks": [
            {"id": "ask", "goal": "ask"},
            {"id": "fail", "goal": "fail"},
            {
                "id": "checked",
                "goal": "fail a check",
                "checks": [{"kind": "command", "run": check}],
            },
        ],
    }
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    env = {k: v for k, v in os.environ.items() if k != "TENURE_STORE"}
    env.update(COLUMNS="250", NO_COLOR="1", TERM="dumb")

    def tenure(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "tenure", *args, "--store", url],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return proc.stdout + proc.stderr

    ran = tenure(
        "run",
        "plan.yaml",
        "--mode",
        "local",
        "--exec",
        f"command:{sys.executable} {tmp_path / 'agent.py'}",
        "--workdir",
        str(tmp_path),
        "--state-dir",
        str(tmp_path / "st"),
    )
    assert "need a person" in ran, ran
    outputs: dict[str, Any] = {"run": ran}
    outputs["status"] = tenure("status")
    outputs["inbox"] = tenure("inbox")
    outputs["log"] = tenure("log")
    outputs["decisions"] = tenure("decisions")
    for name, output in outputs.items():
        assert "\x1b" not in output and "\r" not in output, (name, repr(output[:3000]))
    for name in ("run", "status", "inbox", "log", "decisions"):  # run: its live table
        assert_escaped(outputs[name])
    assert "\\x1b]8;;http://evil.example\\x1b\\" in outputs["log"]  # shown, not a link
    assert "question \\x1b[31mRED" in outputs["inbox"].replace("\n", "")


def test_nasty_text_in_the_demo_story_is_escaped(tmp_path: Path) -> None:
    from io import StringIO

    from rich.console import Console

    from tenure.console.demo_story import Story

    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.append_event("t", "inbox.added", {"task_id": "x", "reason": NASTY})
        sink = StringIO()
        Story(store, "t", Console(file=sink, width=300, color_system=None)).poll()
    text = sink.getvalue()
    assert "\x1b" not in text and "\r" not in text and "[bold red]LOUD[/]" in text
