"""Each preset's generated home files, argv and environment for ``--agent-model``
values; the key reaching only the preset, under its own name, and masked; and the
bad settings refused in one line (``tenure agents``, ``tenure code``)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.executors.agent_cli import AgentCLI
from tenure.executors.agent_model import ENV_AGENT_MODEL, LOCAL_KEY, AgentModel
from tenure.protocol.errors import ConfigError
from tenure.protocol.secrets import redact_text

URL = "http://127.0.0.1:8080/v1"


def cli(name: str, spec: str | None = None, **kwargs: object) -> AgentCLI:
    model = AgentModel.parse(spec) if spec else None
    return AgentCLI.from_spec(name, model=model, **kwargs)  # type: ignore[arg-type]


def home_of(agent: AgentCLI, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return home, agent.prepare_home(home)


def test_codex_gets_its_home_and_a_config_even_without_a_model(tmp_path: Path) -> None:
    home, env = home_of(cli("codex"), tmp_path)
    assert env["CODEX_HOME"] == str(home / "codex")
    assert (home / "codex").is_dir()  # the directory codex refuses to start without
    assert tomllib.loads((home / "codex" / "config.toml").read_text()) == {}


def test_codex_model_setting_is_a_responses_provider_block(tmp_path: Path) -> None:
    agent = cli("codex", f"openai:qwen2.5-coder@{URL}")
    home, _ = home_of(agent, tmp_path)
    config = tomllib.loads((home / "codex" / "config.toml").read_text())
    assert config["model"] == "qwen2.5-coder" and config["model_provider"] == "tenure"
    provider = config["model_providers"]["tenure"]
    assert provider["base_url"] == URL and provider["wire_api"] == "responses"
    assert provider["env_key"] == "OPENAI_API_KEY"
    assert agent.env["OPENAI_API_KEY"] == LOCAL_KEY and agent.pass_env == ()


def test_codex_own_sandbox_is_off_only_inside_tenures() -> None:
    agent = cli("codex")
    values = {"worktree": "/w", "prompt": "p"}
    assert "workspace-write" in agent.argv(values)
    inside = agent.argv(values, sandboxed=True)
    assert "danger-full-access" in inside and "workspace-write" not in inside


def test_claude_model_setting_and_bare_mode() -> None:
    agent = cli("claude", f"openai:small@{URL}", bare=True)
    assert agent.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"  # without /v1
    for var in (
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
    ):
        assert agent.env[var] == "small"
    assert "--bare" in agent.template and agent.env["ANTHROPIC_API_KEY"] == LOCAL_KEY
    assert "--bare" not in cli("claude").template


def test_aider_model_setting_and_its_metadata_file(tmp_path: Path) -> None:
    agent = cli("aider", f"openai:qwen@{URL}")
    argv = agent.template
    assert argv[argv.index("--model") + 1] == "openai/qwen"
    assert argv[argv.index("--openai-api-base") + 1] == URL
    home, env = home_of(agent, tmp_path)
    path = argv[argv.index("--model-metadata-file") + 1].replace("{home}", str(home))
    assert "openai/qwen" in json.loads(Path(path).read_text())
    assert env["HOME"] == str(home)
    anthropic = cli("aider", "anthropic:claude-x@http://127.0.0.1:9000")
    assert anthropic.template[anthropic.template.index("--model") + 1] == "anthropic/claude-x"
    assert anthropic.env["ANTHROPIC_API_BASE"] == "http://127.0.0.1:9000"
    assert anthropic.env["ANTHROPIC_API_KEY"] == LOCAL_KEY


def test_opencode_model_setting_is_an_openai_compatible_provider(tmp_path: Path) -> None:
    agent = cli("opencode", f"openai:qwen@{URL}")
    home, env = home_of(agent, tmp_path)
    assert env["OPENCODE_CONFIG"] == str(home / "opencode.json")
    config = json.loads((home / "opencode.json").read_text())
    provider = config["provider"]["tenure"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"] == {"baseURL": URL, "apiKey": "{env:OPENAI_API_KEY}"}
    assert "qwen" in provider["models"] and config["model"] == "tenure/qwen"
    assert agent.template[-2:] == ["--model", "tenure/qwen"]


def test_gemini_model_setting_and_its_home(tmp_path: Path) -> None:
    agent = cli("gemini", "openai:gemini-2.5-flash@http://127.0.0.1:4000")
    assert agent.env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:4000"
    assert agent.env["GEMINI_MODEL"] == "gemini-2.5-flash"
    home, env = home_of(agent, tmp_path)
    assert env["GEMINI_CLI_HOME"] == str(home / "gemini") and (home / "gemini").is_dir()
    settings = json.loads((home / "gemini" / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert agent.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"


def test_agent_args_are_appended_in_order() -> None:
    agent = cli("codex", extra_args=("--json", "-c", "x=1"))
    assert agent.template[-3:] == ["--json", "-c", "x=1"]
    script = AgentCLI.from_spec("script:echo hi", extra_args=("{worktree}", 'x={"a": 1}'))
    assert script.argv({"worktree": "/w"}) == ["echo", "hi", "/w", 'x={"a": 1}']  # braces kept
    modelled = AgentCLI.from_spec("script:echo", model=AgentModel.parse(f"openai:m@{URL}"))
    assert modelled.env == {ENV_AGENT_MODEL: f"openai:m@{URL}"} and modelled.pass_env == ()


@pytest.mark.parametrize(
    ("name", "spec", "says"),
    [
        ("codex", "anthropic:claude-sonnet-4-5", "codex speaks the OpenAI Responses API"),
        ("claude", "openai:gpt-4.1", "claude speaks the Anthropic messages API"),
        ("gemini", "openai:gpt-4.1", "gemini speaks only Google's Gemini API"),
    ],
)
def test_a_vendor_api_the_cli_cannot_speak_is_refused(
    name: str, spec: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-123")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic-123")
    with pytest.raises(ConfigError, match=says):
        cli(name, spec)


def test_bad_settings_are_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="--agent-bare: codex has no small-prompt mode"):
        cli("codex", bare=True)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        cli("codex", "openai:gpt-4.1")
    with pytest.raises(ConfigError, match="--agent-model"):
        AgentModel.parse("nonsense")
    with pytest.raises(ConfigError, match="does not go with --share-home"):
        cli("codex", f"openai:m@{URL}", isolate_home=False)


def test_the_settings_key_reaches_the_preset_under_its_name_only_and_is_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-or-test-key-0123456789"
    monkeypatch.setenv("OPENROUTER_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-openai-key-999")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ambient-anthropic-999")
    agent = cli("codex", "openrouter:qwen/qwen3-coder")
    dump = tmp_path / "seen.json"
    probe = (
        "import json, os, pathlib, sys; home = pathlib.Path(os.environ['CODEX_HOME']); "
        "json.dump({'env': dict(os.environ), 'config': (home / 'config.toml').read_text()}, "
        "open(sys.argv[1], 'w'))"
    )
    agent = dataclasses.replace(agent, template=[sys.executable, "-c", probe, str(dump)])
    agent.sandbox = "off"
    worktree = tmp_path / "wt"
    worktree.mkdir()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    run = agent.run(
        worktree=worktree,
        task_file=tmp_path / "task.md",
        result_file=tmp_path / "result.md",
        attempt_dir=tmp_path / "attempt",
        deadline_seconds=60,
        extra_env={},
        commit_message="test",
    )
    assert run.exit_code == 0, run.log.read_text()
    seen = json.loads(dump.read_text())
    assert seen["env"]["OPENAI_API_KEY"] == key  # the setting's key, in codex's variable
    assert "OPENROUTER_API_KEY" not in seen["env"] and "ANTHROPIC_API_KEY" not in seen["env"]
    assert key not in seen["config"]  # config files name the variable, never the key
    assert tomllib.loads(seen["config"])["model_providers"]["tenure"]["base_url"] == (
        "https://openrouter.ai/api/v1"
    )
    assert redact_text(f"the key is {key}") == "the key is ***"
    assert key not in repr(agent) and key not in repr(agent.model)
    assert key not in run.log.read_text()


names = st.text(
    alphabet=st.characters(
        whitelist_categories=("L", "N", "P", "S"), blacklist_characters="@", max_codepoint=0x2FF
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(name=names, port=st.integers(1, 65535), path=st.sampled_from(["", "/v1", "/api/v1/"]))
def test_any_model_name_and_url_survive_into_codex_and_opencode_configs(
    name: str, port: int, path: str
) -> None:
    spec = f"openai:{name}@http://127.0.0.1:{port}{path}"
    model = AgentModel.parse(spec)
    v1 = model.v1
    codex = AgentCLI.from_spec("codex", model=model)
    config = tomllib.loads(codex.setup.files["codex/config.toml"])
    assert config["model"] == model.name and config["model_providers"]["tenure"]["base_url"] == v1
    opencode = AgentCLI.from_spec("opencode", model=model)
    provider = json.loads(opencode.setup.files["opencode.json"])["provider"]["tenure"]
    assert list(provider["models"]) == [model.name] and provider["options"]["baseURL"] == v1
    assert opencode.template[-1] == f"tenure/{model.name}"


def tenure(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_tenure_agents_json_shows_the_command_line_with_the_model_applied() -> None:
    import os

    env = {**os.environ, ENV_AGENT_MODEL: f"openai:from-env@{URL}"}
    env.pop("OPENAI_API_KEY", None)
    done = tenure("agents", "opencode", "claude", "--json", "--agent-arg", "--verbose", env=env)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["agents"]}
    assert set(rows) == {"opencode", "claude"}
    assert rows["opencode"]["argv"][-3:] == ["--model", "tenure/from-env", "--verbose"]
    assert rows["opencode"]["env"]["OPENCODE_CONFIG"] == "{home}/opencode.json"
    assert rows["claude"]["env"]["ANTHROPIC_MODEL"] == "from-env"
    assert "{prompt}" in rows["claude"]["argv"]
    assert isinstance(rows["claude"]["installed"], bool)


def test_tenure_agents_masks_the_key_and_refuses_bad_input_in_one_line() -> None:
    import os

    key = "sk-or-secret-value-42424242"
    env = {**os.environ, "OPENROUTER_API_KEY": key}
    shown = tenure("agents", "codex", "--json", "--agent-model", "openrouter:qwen3", env=env)
    assert shown.returncode == 0, shown.stderr
    assert key not in shown.stdout and "***" in shown.stdout
    for args, says in [
        (("agents", "nope"), "--agent must be one of"),
        (("agents", "--agent-model", "openai"), "--agent-model='openai' is not a model"),
        (("agents", "codex", "--agent-bare"), "codex has no small-prompt mode"),
    ]:
        bad = tenure(*args)
        assert bad.returncode == 1 and says in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    bare = tenure("agents", "--agent-bare", "--json")
    assert bare.returncode == 0, bare.stderr
    assert [r["name"] for r in json.loads(bare.stdout)["agents"]] == ["claude"]
    assert "--bare" in json.loads(bare.stdout)["agents"][0]["argv"]
    helped = tenure("agents", "--help")
    assert helped.returncode == 0 and "Example" in helped.stdout


@pytest.mark.parametrize(
    ("flag", "said"),
    [("--agent-bare", "aider has no small-prompt mode"), ("--agent-mcp", "aider has no MCP client")],
)
def test_tenure_code_refuses_a_bad_agent_setting_in_one_line(
    tmp_path: Path, flag: str, said: str
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("team: code\ngoal: g\ntasks:\n  - id: t1\n    goal: g\n    scope: [a]\n")
    done = tenure("code", str(plan), "--repo", str(tmp_path), "--agent", "aider", flag)
    assert done.returncode == 1 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_unreachable_server_is_named_and_a_listening_one_is_not() -> None:
    import socket

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert AgentModel.parse(f"openai:m@http://127.0.0.1:{port}/v1").unreachable() is None
    why = AgentModel.parse(f"openai:m@http://127.0.0.1:{port}/v1").unreachable()
    assert why is not None and f"cannot reach the model server at http://127.0.0.1:{port}/v1" in why
    assert AgentModel.parse("anthropic:claude-x@http://127.0.0.1:9").key is None


# --- --agent-mcp: the attempt's MCP server in each CLI's own configuration ----------------

MCP_URL = "http://127.0.0.1:40123/mcp"


def test_each_preset_with_an_mcp_client_names_the_server_and_only_the_tokens_variable(
    tmp_path: Path,
) -> None:
    for name in ("claude", "codex", "gemini", "opencode"):
        agent = cli(name, "openai:m@" + URL).with_mcp()
        assert agent.mcp
        home = tmp_path / name
        home.mkdir()
        agent.prepare_home(home, MCP_URL)
        written = "".join(p.read_text() for p in home.rglob("*") if p.is_file())
        assert MCP_URL in written and "{mcp_url}" not in written, name
        assert "TENURE_MCP_TOKEN" in written, name  # the variable, never a token
    claude = json.loads((tmp_path / "claude" / "claude-mcp.json").read_text())
    server = claude["mcpServers"]["tenure"]
    assert server == {
        "type": "http",
        "url": MCP_URL,
        "headers": {"Authorization": "Bearer ${TENURE_MCP_TOKEN}"},
    }
    argv = cli("claude").with_mcp().argv({"home": "/h"})
    assert argv[-5:] == [
        "--mcp-config", "/h/claude-mcp.json", "--strict-mcp-config", "--allowedTools", "mcp__tenure",
    ]  # fmt: skip
    codex = tomllib.loads((tmp_path / "codex" / "codex" / "config.toml").read_text())
    assert codex["mcp_servers"]["tenure"] == {
        "url": MCP_URL,
        "bearer_token_env_var": "TENURE_MCP_TOKEN",
    }
    assert codex["model_providers"]["tenure"]["wire_api"] == "responses"  # the model kept
    gemini = json.loads((tmp_path / "gemini" / "gemini" / ".gemini" / "settings.json").read_text())
    assert gemini["mcpServers"]["tenure"]["httpUrl"] == MCP_URL
    assert gemini["security"]["auth"]["selectedType"] == "gemini-api-key"
    opencode = json.loads((tmp_path / "opencode" / "opencode.json").read_text())
    assert opencode["mcp"]["tenure"]["type"] == "remote"
    assert opencode["provider"]["tenure"]["options"]["baseURL"] == URL


def test_agent_mcp_is_refused_for_aider_and_with_a_shared_home_and_a_script_gets_its_url() -> None:
    with pytest.raises(ConfigError, match="--agent-mcp: aider has no MCP client"):
        cli("aider").with_mcp()
    with pytest.raises(ConfigError, match="--agent-mcp .* does not go with --share-home"):
        cli("claude", isolate_home=False).with_mcp()
    script = AgentCLI.from_spec("script:my-agent").with_mcp()
    assert script.mcp and script.template == ["my-agent"] and not script.setup.files


def test_an_agent_with_mcp_runs_only_with_its_server_and_token(tmp_path: Path) -> None:
    agent = AgentCLI.from_spec("script:true", sandbox="off").with_mcp()
    with pytest.raises(ConfigError, match="with its attempt's MCP server and token"):
        agent.run(
            worktree=tmp_path, task_file=tmp_path / "t.md", result_file=tmp_path / "r.md",
            attempt_dir=tmp_path / "a", deadline_seconds=5, extra_env={}, commit_message="m",
        )  # fmt: skip


def test_tenure_agents_shows_the_mcp_configuration_of_the_presets_that_have_one() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "agents", "--agent-mcp", "--json", "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["agents"]}
    assert set(rows) == {"claude", "codex", "gemini", "opencode"}  # aider has no MCP client
    assert "{mcp_url}" in rows["codex"]["files"]["codex/config.toml"]
    assert "--strict-mcp-config" in rows["claude"]["argv"]
