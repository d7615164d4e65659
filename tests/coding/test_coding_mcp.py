"""``tenure code --agent-mcp``: each attempt's agent reports over an MCP server of its
own (streamable HTTP on loopback, outside the sandbox, a token per attempt) instead of
a result file. A scripted agent speaks MCP with the official SDK's client from inside
the sandbox; what it submits is the attempt's result, and the leader's checks decide."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from tenure.executors.agent_cli import AgentCLI
from tenure.executors.sandbox import bwrap_problem
from tenure.protocol.errors import ConfigError
from tenure.roles.coding import CodingConfig, CodingLeader
from tenure.store import Store, open_store

from .conftest import fix_task, make_plan, sh

MCP_AGENT = Path(__file__).with_name("mcp_agent.py")
pytestmark = pytest.mark.timeout(180)


def mcp_agent(tmp_path: Path, config: dict[str, Any]) -> AgentCLI:
    path = tmp_path / "mcp-agent.json"
    path.write_text(json.dumps(config))
    return AgentCLI.from_spec(f"script:{sys.executable} {MCP_AGENT} {path}")


def run(repo: Path, agent: AgentCLI, tasks: list[dict[str, Any]], url: str) -> dict[str, str]:
    plan = make_plan(tasks, max_attempts=1)
    config = CodingConfig(
        repo=repo, plan=plan, agent=agent, run_id="r1", workers=2, store_url=url, agent_mcp=True
    )
    return CodingLeader(config).run().states


def result(store: Store, task_id: str) -> dict[str, Any]:
    done = store.get_task("code/r1", task_id).result
    assert done is not None
    return done


def test_results_arrive_over_mcp_and_the_leaders_checks_decide(repo: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    agent = mcp_agent(
        tmp_path, {"t1": {"file": "m1.py", "mode": "fix"}, "t2": {"file": "m2.py", "mode": "lie"}}
    )
    fixed = fix_task(1, acceptance_criteria=["m1.value() returns 1"])
    assert run(repo, agent, [fixed, fix_task(2)], url) == {"t1": "merged", "t2": "needs-operator"}
    with open_store(url) as store:
        good, lie = result(store, "t1"), result(store, "t2")
        progress = [e.data for e in store.events("code/r1") if e.kind == "mcp.progress"]
    assert good["artifact"]["agent"]["reported"] == "mcp"
    assert good["artifact"]["agent"]["sandboxed"] == (bwrap_problem() is None)  # reached from inside
    assert good["notes"]["changed"] == ["m1.py"]
    seen = good["notes"]["verified"]
    assert "without the token: HTTP 401" in seen  # the attempt's server wants its token
    (other,) = [line for line in seen if line.startswith("another task:")]
    assert "this server serves 't1' only; 'someone-elses' is not in its scope" in other
    assert "criteria restated: m1.value() returns 1" in seen  # the check-in's reply
    assert "tools: ask_question, read_task, report_progress, submit_result" in seen
    assert {p["task_id"] for p in progress} == {"t1", "t2"}
    # the agent said "completed" for t2 too: the leader's check, not its word, decided
    assert lie["status"] == "completed" and lie["artifact"]["agent"]["reported"] == "mcp"
    report = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/results/t1.md")
    assert "(reported over MCP: submit_result, status completed)" in report
    assert '"mode": "fix"' in report  # the artifact it submitted, in its report
    failed = sh(repo, "show", "tenure/r1/integration:.tenure/runs/r1/inbox.md")
    assert "t2" in failed


def test_a_question_over_mcp_sends_the_task_to_the_operator(repo: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    agent = mcp_agent(tmp_path, {"t1": {"file": "m1.py", "mode": "ask"}})
    assert run(repo, agent, [fix_task(1)], url) == {"t1": "needs-operator"}
    with open_store(url) as store:
        task = store.get_task("code/r1", "t1")
    assert task.state == "blocked"
    assert (task.result or {}).get("question") == "Which value, 1 or 2?"


def test_an_agent_that_submits_nothing_falls_back_to_its_result_file(
    repo: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    agent = mcp_agent(tmp_path, {"t1": {"file": "m1.py", "mode": "quiet"}})
    assert run(repo, agent, [fix_task(1)], url) == {"t1": "merged"}
    with open_store(url) as store:
        quiet = result(store, "t1")
    assert quiet["artifact"]["agent"]["reported"] == "file"
    assert "from the file" in quiet["artifact"]["report"]


def test_a_cli_without_an_mcp_client_is_refused_before_anything_runs(repo: Path) -> None:
    plan = make_plan([fix_task(1)])
    aider = AgentCLI.from_spec("aider")
    config = CodingConfig(repo=repo, plan=plan, agent=aider, check_installed=False, agent_mcp=True)
    with pytest.raises(ConfigError, match="--agent-mcp: aider has no MCP client"):
        CodingLeader(config)
    assert not (repo / ".tenure" / "worktrees").exists()
