"""The presets against the genuine agent CLIs, pointed at a local test server.

Nothing is installed here: a CLI on the PATH is used, one that is not is skipped
(``.ci/run`` installs codex and lists it in ``TENURE_CI_AGENT_CLIS``; a CLI named
there and missing fails instead). The server speaks the OpenAI chat-completions and
responses, the Anthropic messages and Google's generateContent wire formats; what the agent edits is never asserted, only that it started,
reached the server with the configured model, was killed at its deadline when the
server never answers, and that the leader's checks decided each task.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from models.wire_server import Reply, WireServer, call, namespaced_call, slow, text
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.agent_model import AgentModel
from tenure.executors.sandbox import bwrap_problem
from tenure.roles.coding import CodingConfig, CodingLeader
from tenure.store import open_store as tenure_store

from .conftest import make_plan

MODEL = "tenure-test-model"
CI_CLIS = {n.strip() for n in os.environ.get("TENURE_CI_AGENT_CLIS", "").split(",") if n.strip()}
# each CLI's first start with a fresh home (opencode unpacks its providers) takes a while
DEADLINES = {"aider": 120.0, "claude": 120.0, "codex": 120.0, "gemini": 120.0, "opencode": 180.0}
QUICK = {
    "aider": 30.0,
    "claude": 15.0,
    "codex": 15.0,
    "gemini": 20.0,
    "opencode": 120.0,
}  # a deadline past its start-up
REAL = sorted(DEADLINES)


INSTALL = {
    "aider": "pip install aider-chat",
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "gemini": "npm install -g @google/gemini-cli",
    "opencode": "npm install -g opencode-ai",
}


def need(program: str) -> None:
    if shutil.which(program) is not None:
        return
    if program in CI_CLIS:
        pytest.fail(f"{program} is listed in TENURE_CI_AGENT_CLIS but is not on PATH")
    pytest.skip(f"{program} is not installed (not on PATH): {INSTALL[program]}")


def agent(name: str, server: WireServer) -> AgentCLI:
    model = AgentModel.parse(f"openai:{MODEL}@{server.openai_url}")
    return AgentCLI.from_spec(name, model=model, bare=name == "claude")


def task(tid: str, *, passes: bool, deadline: float) -> dict[str, object]:
    code = "0" if passes else "3"
    return {
        "id": tid,
        "goal": "say that you are done; change nothing",
        "scope": ["notes.txt"],
        "deadline_seconds": deadline,
        "checks": [
            {
                "kind": "command",
                "run": f'{sys.executable} -c "raise SystemExit({code})"',
                "timeout_seconds": 30,
            }
        ],
    }


def logs(repo: Path) -> list[str]:
    return [
        p.read_text(errors="replace") for p in sorted(repo.glob(".tenure/attempts/*/*/agent.log"))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL)
def test_the_real_cli_reaches_the_server_and_the_checks_decide(name: str, repo: Path) -> None:
    need(name)
    with WireServer([text("Done: nothing needed changing.")]) as server:
        plan = make_plan(
            [
                task("good", passes=True, deadline=DEADLINES[name]),
                task("bad", passes=False, deadline=DEADLINES[name]),
            ],
            max_attempts=1,
        )
        config = CodingConfig(
            repo=repo, plan=plan, agent=agent(name, server), run_id="r1", workers=1
        )
        outcome = CodingLeader(config).run()
    joined = "\n".join(logs(repo))
    assert server.requests, f"{name} never reached the test server:\n{joined[-3000:]}"
    assert {r.get("model") for r in server.requests} == {MODEL}, joined[-3000:]
    if bwrap_problem() is None:
        assert "[tenure] in a sandbox" in joined  # the preset runs as CI runs it
    assert outcome.states["good"] == "merged", (outcome.states, joined[-3000:])
    assert outcome.states["bad"] == "needs-operator", outcome.states  # its check failed
    assert not outcome.done


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL)
def test_the_real_cli_is_killed_at_its_deadline(name: str, repo: Path) -> None:
    need(name)
    never: Reply = slow(600, text("too late"))
    with WireServer([never]) as server:
        plan = make_plan([task("t1", passes=True, deadline=QUICK[name])], max_attempts=1)
        config = CodingConfig(repo=repo, plan=plan, agent=agent(name, server), run_id="r1")
        outcome = CodingLeader(config).run()
        seen = list(server.requests)
    (log,) = logs(repo)
    assert "exceeded; process group killed" in log, log[-3000:]
    assert seen and {r.get("model") for r in seen} == {MODEL}, log[-3000:]
    assert outcome.states["t1"] == "needs-operator", outcome.states
    left = subprocess.run(["pgrep", "-f", str(repo)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"processes left running: {left.stdout}"


COMMAND_CALLS = {
    "codex": call("exec_command", cmd="echo written-by-agent > notes.txt"),
    "claude": call("Bash", command="echo written-by-agent > notes.txt", description="write"),
    "gemini": call("run_shell_command", command="echo written-by-agent > notes.txt"),
    "opencode": call("bash", command="echo written-by-agent > notes.txt", description="write"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMAND_CALLS))
def test_the_real_cli_runs_the_commands_its_model_asks_for_in_the_sandbox(
    name: str, repo: Path
) -> None:
    """codex starts its own sandbox for each command; inside Tenure's it cannot (bwrap
    does not nest), so the preset turns codex's off there: the command must run."""
    need(name)
    if bwrap_problem() is not None:
        pytest.skip(f"runs {name} inside Tenure's sandbox, and {bwrap_problem()}")
    asked = COMMAND_CALLS[name]

    def respond(provider: str, body: dict[str, Any]) -> Reply:
        """The call once, to a request that offers tools (not a title or a summary)."""
        if body.get("tools") and "written-by-agent" not in json.dumps(body):
            return asked
        return text("Done.")

    check = f"{sys.executable} -c \"import pathlib; assert 'written-by-agent' in pathlib.Path('notes.txt').read_text()\""
    spec = task("t1", passes=True, deadline=120.0)
    spec["checks"] = [{"kind": "command", "run": check, "timeout_seconds": 30}]
    with WireServer(responder=respond) as server:
        plan = make_plan([spec], max_attempts=1)
        config = CodingConfig(repo=repo, plan=plan, agent=agent(name, server), run_id="r1")
        outcome = CodingLeader(config).run()
    (log,) = logs(repo)
    assert len(server.requests) >= 2, log[-3000:]  # the command's output went back
    assert outcome.states["t1"] == "merged", (outcome.states, log[-3000:])


@pytest.mark.slow
def test_tenure_code_runs_the_codex_preset_against_the_agent_model(
    repo: Path, tmp_path: Path
) -> None:
    need("codex")
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        json.dumps(
            {"team": "code", "goal": "g", "tasks": [task("t1", passes=True, deadline=120.0)]}
        )
    )
    with WireServer([text("Done.")]) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tenure",
                "code",
                str(plan),
                "--repo",
                str(repo),
                "--agent",
                "codex",
                "--agent-model",
                f"openai:{MODEL}@{server.openai_url}",
                "--run",
                "r1",
                "--workers",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "t1" in done.stdout and "merged" in done.stdout
    assert server.requests and {r.get("model") for r in server.requests} == {MODEL}
    config = next(repo.glob(".tenure/attempts/r1/t1-*/home/codex/config.toml")).read_text()
    assert server.openai_url in config and 'wire_api = "responses"' in config


def test_tenure_agents_reports_an_installed_cli_and_its_version(tmp_path: Path) -> None:
    need("codex")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenure",
            "agents",
            "codex",
            "--json",
            "--agent-model",
            f"openai:{MODEL}@http://127.0.0.1:9/v1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["agents"]
    assert row["installed"] and row["version"] and "codex" in row["version"]
    assert 'wire_api = "responses"' in row["files"]["codex/config.toml"]


MCP_CLIS = ["claude", "codex", "gemini"]  # opencode too, untested here: not installed


def mcp_tool(body: dict[str, Any], tool: str) -> Reply | None:
    """A call of the MCP server's ``tool`` as this CLI offered it to its model (claude:
    ``mcp__tenure__TOOL``, gemini: ``mcp_tenure_TOOL``, codex: ``TOOL`` in the namespace
    ``mcp__tenure``); None when the request offers no such tool."""

    def calling(**arguments: Any) -> Reply:
        for entry in body.get("tools") or []:
            if entry.get("type") == "namespace" and tool in json.dumps(entry.get("tools")):
                return namespaced_call(entry["name"], tool, **arguments)
        (name,) = set(re.findall(rf'"name": "([\w-]*tenure[\w-]*{tool})"', json.dumps(body)))
        return call(name, **arguments)

    if not re.search(rf'"{tool}"|tenure[\w-]*{tool}"', json.dumps(body.get("tools") or "")):
        return None
    if tool == "read_task":
        return calling(task_id="someone-elses")
    return calling(
        status="completed",
        notes={"changed": [], "verified": ["nothing needed changing"], "uncertain": []},
    )


def over_mcp(provider: str, body: dict[str, Any]) -> Reply:
    """The model: first asks for another task (refused), then submits, then is done."""
    said = json.dumps(body)
    if "not in its scope" not in said:
        asked = mcp_tool(body, "read_task")
    elif '\\"submitted\\"' not in said and '"submitted"' not in said:
        asked = mcp_tool(body, "submit_result")
    else:
        asked = None
    return asked or text("Done.")


@pytest.mark.slow
@pytest.mark.parametrize("name", MCP_CLIS)
def test_the_real_cli_reports_over_mcp_and_the_checks_decide(name: str, repo: Path) -> None:
    """--agent-mcp: the CLI reads its attempt's MCP server (outside the sandbox, by its
    token) from its own MCP configuration; the model asks for another task (refused) and
    submits; the result arrives over MCP, and the leader's checks decide each task."""
    need(name)
    with WireServer(responder=over_mcp) as server:
        plan = make_plan(
            [
                task("good", passes=True, deadline=DEADLINES[name]),
                task("bad", passes=False, deadline=DEADLINES[name]),
            ],
            max_attempts=1,
        )
        url = f"sqlite:///{repo.parent / 'state.db'}"
        config = CodingConfig(
            repo=repo, plan=plan, agent=agent(name, server), run_id="r1", workers=1,
            store_url=url, agent_mcp=True,
        )  # fmt: skip
        outcome = CodingLeader(config).run()
        said = [json.dumps(r) for r in server.requests]
    joined = "\n".join(logs(repo))
    assert any("is not in its scope" in s for s in said), joined[-3000:]  # refused, to the model
    assert outcome.states == {"good": "merged", "bad": "needs-operator"}, (outcome.states, joined[-3000:])
    with tenure_store(url) as store:
        for task_id in ("good", "bad"):
            done = store.get_task("code/r1", task_id).result or {}
            assert done["artifact"]["agent"]["reported"] == "mcp", (task_id, joined[-3000:])
            assert done["notes"]["verified"] == ["nothing needed changing"]
    if bwrap_problem() is None:
        assert "[tenure] in a sandbox" in joined
