"""The agent CLI presets: each CLI's command line, its home, its key, and its model setup.

A preset is what Tenure knows about one real CLI (measured against its current
release): the non-interactive argv, the variable that moves its config/state into
the attempt's home, the provider key it is given and no other, the files its home
needs before it starts, and how a model setting (``AgentModel``) becomes the CLI's
own configuration:

- claude: ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_MODEL`` / ``ANTHROPIC_DEFAULT_*_MODEL``
  / ``ANTHROPIC_SMALL_FAST_MODEL`` (Anthropic messages wire); ``--bare`` for a small
  system prompt;
- codex: ``CODEX_HOME/config.toml`` with a provider block (``wire_api = "responses"``);
  its own sandbox (``-s workspace-write``) only where Tenure's is not around it;
- aider: ``--model openai/NAME --openai-api-base URL`` and a model-metadata file;
- opencode: an ``OPENCODE_CONFIG`` file with an ``@ai-sdk/openai-compatible`` provider;
- gemini: ``GOOGLE_GEMINI_BASE_URL`` + ``GEMINI_MODEL`` (Gemini wire: a translating
  proxy for any other model), and a settings file choosing API-key auth.

Keys never go into a file or an argv (both end up in logs): the key reaches the
CLI as its own key variable, and config files name that variable.

With ``--agent-mcp`` a preset also points its CLI at the attempt's MCP server
(streamable HTTP on loopback, ``{mcp_url}``; its bearer token in ``TENURE_MCP_TOKEN``,
which the configuration names and never holds), in the CLI's own MCP configuration:

- claude: ``--mcp-config HOME/claude-mcp.json --strict-mcp-config`` and the server's
  tools allowed (``--allowedTools mcp__tenure``);
- codex: ``[mcp_servers.tenure]`` in its ``config.toml`` (``url``, ``bearer_token_env_var``);
- gemini: ``mcpServers.tenure`` in its ``settings.json`` (``httpUrl``, ``headers``);
- opencode: ``mcp.tenure`` in its config (``type = "remote"``, ``url``, ``headers``);
- aider has no MCP client: the preset refuses the option.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tenure.executors.agent_model import AgentModel
from tenure.protocol.errors import ConfigError


@dataclass(frozen=True)
class Setup:
    """What a preset adds for one attempt: argv after its template, environment values,
    variables naming a path in the home, and files written in the home before it runs."""

    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    home_env: dict[str, str] = field(default_factory=dict)  # VAR -> path relative to home
    files: dict[str, str] = field(default_factory=dict)  # path relative to home -> text


Prepare = Callable[[AgentModel | None], Setup]
WithMCP = Callable[[Setup], Setup]
"""A preset's setup with the attempt's MCP server added (``{mcp_url}``, ``TENURE_MCP_TOKEN``)."""

MCP_SERVER = "tenure"
"""The name the attempt's MCP server has in every CLI's configuration."""
MCP_URL = "{mcp_url}"
"""Filled with the attempt's MCP server's URL when the attempt runs."""
MCP_TOKEN_VAR = "TENURE_MCP_TOKEN"
"""The variable holding the attempt's bearer token; configuration files only name it."""
Wire = Literal["openai", "anthropic", "responses", "gemini"]
"""The API a CLI speaks (``openai``: any, through its own provider layer)."""


@dataclass(frozen=True)
class Preset:
    """One CLI: ``argv`` (placeholders in ``{}``), ``config_var`` (its own home variable,
    set to ``{home}/NAME``; None: ``HOME`` is the attempt's home), ``keys`` (the provider
    keys passed from the environment), ``bare`` (argv of its small-prompt mode)."""

    name: str
    argv: tuple[str, ...]
    config_var: str | None
    keys: tuple[str, ...]
    prepare: Prepare
    bare: tuple[str, ...] | None = None
    wire: Wire = "openai"
    anthropic_key: str | None = None  # its key variable for an anthropic: setting
    # argv words swapped when Tenure's bubblewrap contains the CLI: a sandbox of its
    # own cannot nest there (bwrap in bwrap: "setting up uid map: Operation not permitted")
    in_sandbox: dict[str, str] = field(default_factory=dict)
    with_mcp: WithMCP | None = None  # how it is pointed at an MCP server; None: it cannot be

    def setup(self, model: AgentModel | None, *, bare: bool = False) -> Setup:
        """This preset's additions for ``model`` (ConfigError if it cannot use it)."""
        if bare and self.bare is None:
            with_bare = ", ".join(n for n, p in PRESETS.items() if p.bare is not None)
            raise ConfigError(
                f"--agent-bare: {self.name} has no small-prompt mode (only {with_bare})"
            )
        if model is not None:
            self._check_wire(model)
        made = self.prepare(model)
        if bare and self.bare is not None:
            made = Setup((*self.bare, *made.argv), made.env, made.home_env, made.files)
        return made

    def mcp(self, made: Setup) -> Setup:
        """``made`` with the attempt's MCP server added (ConfigError if the CLI has no
        MCP client)."""
        if self.with_mcp is None:
            able = ", ".join(n for n, p in PRESETS.items() if p.with_mcp is not None)
            raise ConfigError(
                f"--agent-mcp: {self.name} has no MCP client (presets that have one: "
                f"{able}; or a script: agent, given TENURE_MCP_URL and {MCP_TOKEN_VAR})"
            )
        return self.with_mcp(made)

    def key_var(self, model: AgentModel) -> str:
        """The variable the CLI reads the model setting's key from."""
        if model.wire == "anthropic" and self.anthropic_key is not None:
            return self.anthropic_key
        return self.keys[0]

    def _check_wire(self, model: AgentModel) -> None:
        if model.custom:
            return  # a server of its own: it must speak this CLI's wire (documented)
        speaks = {
            "anthropic": "the Anthropic messages API",
            "responses": "the OpenAI Responses API",
            "gemini": "only Google's Gemini API",
        }.get(self.wire)
        if speaks is None or self.wire == model.wire:
            return
        if self.wire == "responses" and model.wire == "openai":
            return
        raise ConfigError(
            f"--agent-model {model.spec}: {self.name} speaks {speaks}, not "
            f"{model.spec.provider}'s; name a server that does with @URL "
            f"(e.g. openai:MODEL@http://localhost:8080/v1)"
        )


def _claude(model: AgentModel | None) -> Setup:
    if model is None:
        return Setup()
    env = {
        "ANTHROPIC_MODEL": model.name,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model.name,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model.name,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model.name,
        "ANTHROPIC_SMALL_FAST_MODEL": model.name,
    }
    if model.root is not None:
        env["ANTHROPIC_BASE_URL"] = model.root
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    return Setup(env=env)


CODEX_CONFIG = "codex/config.toml"


def _codex(model: AgentModel | None) -> Setup:
    lines = ["# written by tenure for this attempt"]
    if model is not None:
        lines.append(f"model = {_toml(model.name)}")
        if model.v1 is not None:
            lines += [
                'model_provider = "tenure"',
                "",
                "[model_providers.tenure]",
                'name = "tenure"',
                f"base_url = {_toml(model.v1)}",
                'env_key = "OPENAI_API_KEY"',
                'wire_api = "responses"',
            ]
    files = {CODEX_CONFIG: "\n".join(lines) + "\n"}
    return Setup(files=files)


AIDER_METADATA = "aider.model-metadata.json"


def _aider(model: AgentModel | None) -> Setup:
    argv: tuple[str, ...] = ("--model-metadata-file", "{home}/" + AIDER_METADATA)
    metadata: dict[str, object] = {}
    env: dict[str, str] = {}
    if model is not None:
        prefix = "anthropic" if model.wire == "anthropic" else "openai"
        name = f"{prefix}/{model.name}"
        argv += ("--model", name)
        if model.wire == "anthropic" and model.root is not None:
            env["ANTHROPIC_API_BASE"] = model.root
        elif model.v1 is not None:
            argv += ("--openai-api-base", model.v1)
        metadata[name] = {
            "litellm_provider": prefix,
            "mode": "chat",
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
        }
    files = {AIDER_METADATA: json.dumps(metadata, indent=2) + "\n"}
    return Setup(argv=argv, env=env, files=files)


OPENCODE_CONFIG = "opencode.json"


def _opencode(model: AgentModel | None) -> Setup:
    config: dict[str, object] = {"$schema": "https://opencode.ai/config.json", "autoupdate": False}
    argv: tuple[str, ...] = ()
    env: dict[str, str] = {}
    if model is not None and model.v1 is not None:
        anthropic = model.wire == "anthropic"
        key_var = "ANTHROPIC_API_KEY" if anthropic else "OPENAI_API_KEY"
        config["provider"] = {
            "tenure": {
                "npm": "@ai-sdk/anthropic" if anthropic else "@ai-sdk/openai-compatible",
                "name": "tenure",
                "options": {"baseURL": model.v1, "apiKey": "{env:" + key_var + "}"},
                "models": {model.name: {"name": model.name}},
            }
        }
        config["model"] = f"tenure/{model.name}"
        argv = ("--model", f"tenure/{model.name}")
        env["OPENCODE_DISABLE_AUTOCOMPACT"] = "1"  # a small context loops compacting
    elif model is not None:
        vendor = "anthropic" if model.wire == "anthropic" else "openai"
        argv = ("--model", f"{vendor}/{model.name}")
    files = {OPENCODE_CONFIG: json.dumps(config, indent=2) + "\n"}
    return Setup(argv=argv, env=env, home_env={"OPENCODE_CONFIG": OPENCODE_CONFIG}, files=files)


GEMINI_SETTINGS = "gemini/.gemini/settings.json"


def _gemini(model: AgentModel | None) -> Setup:
    # a fresh home has no auth method chosen ("Invalid auth method selected") and a
    # fresh worktree is not a trusted folder: headless, gemini refuses both
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    env = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
    if model is not None:
        env["GEMINI_MODEL"] = model.name
        if model.root is not None:
            env["GOOGLE_GEMINI_BASE_URL"] = model.root  # a proxy that speaks Gemini's wire
    return Setup(env=env, files={GEMINI_SETTINGS: json.dumps(settings, indent=2) + "\n"})


CLAUDE_MCP = "claude-mcp.json"
BEARER = "Bearer "


def _claude_mcp(made: Setup) -> Setup:
    config = {
        "mcpServers": {
            MCP_SERVER: {
                "type": "http",
                "url": MCP_URL,
                "headers": {"Authorization": BEARER + "${" + MCP_TOKEN_VAR + "}"},
            }
        }
    }
    argv: tuple[str, ...] = ("--mcp-config", "{home}/" + CLAUDE_MCP, "--strict-mcp-config")
    argv += ("--allowedTools", f"mcp__{MCP_SERVER}")  # its tools, without a prompt
    files = {**made.files, CLAUDE_MCP: json.dumps(config, indent=2) + "\n"}
    return Setup((*made.argv, *argv), made.env, made.home_env, files)


def _codex_mcp(made: Setup) -> Setup:
    block = "\n".join(
        [
            "",
            f"[mcp_servers.{MCP_SERVER}]",
            f"url = {_toml(MCP_URL)}",
            f"bearer_token_env_var = {_toml(MCP_TOKEN_VAR)}",
            "",
        ]
    )
    files = {**made.files, CODEX_CONFIG: made.files.get(CODEX_CONFIG, "") + block}
    return Setup(made.argv, made.env, made.home_env, files)


def _gemini_mcp(made: Setup) -> Setup:
    settings = json.loads(made.files[GEMINI_SETTINGS])
    settings["mcpServers"] = {
        MCP_SERVER: {
            "httpUrl": MCP_URL,
            "headers": {"Authorization": BEARER + "$" + MCP_TOKEN_VAR},
            "trust": True,  # its tools run without a confirmation prompt (headless)
        }
    }
    files = {**made.files, GEMINI_SETTINGS: json.dumps(settings, indent=2) + "\n"}
    return Setup(made.argv, made.env, made.home_env, files)


def _opencode_mcp(made: Setup) -> Setup:
    config = json.loads(made.files[OPENCODE_CONFIG])
    config["mcp"] = {
        MCP_SERVER: {
            "type": "remote",
            "url": MCP_URL,
            "headers": {"Authorization": BEARER + "{env:" + MCP_TOKEN_VAR + "}"},
            "enabled": True,
        }
    }
    files = {**made.files, OPENCODE_CONFIG: json.dumps(config, indent=2) + "\n"}
    return Setup(made.argv, made.env, made.home_env, files)


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are a subset TOML reads)."""
    return json.dumps(value)


PRESETS: dict[str, Preset] = {
    "claude": Preset(
        "claude",
        (
            "claude",
            "-p",
            "{prompt}",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Read,Edit,Write,Bash",
        ),
        "CLAUDE_CONFIG_DIR",
        ("ANTHROPIC_API_KEY",),
        _claude,
        bare=("--bare",),
        wire="anthropic",
        with_mcp=_claude_mcp,
    ),
    "codex": Preset(
        "codex",
        (
            "codex",
            "exec",
            "-s",
            "workspace-write",
            "--skip-git-repo-check",
            "-C",
            "{worktree}",
            "{prompt}",
        ),
        "CODEX_HOME",
        ("OPENAI_API_KEY",),
        _codex,
        wire="responses",
        in_sandbox={"workspace-write": "danger-full-access"},
        with_mcp=_codex_mcp,
    ),
    "aider": Preset(
        "aider",
        (
            "aider",
            "--message",
            "{prompt}",
            "--yes-always",
            "--no-auto-commits",
            "--no-gitignore",
            "--no-check-update",
            "--map-tokens",
            "0",
            "--input-history-file",
            "{home}/aider.input.history",
            "--chat-history-file",
            "{home}/aider.chat.history.md",
            "--read",
            "{task_file}",
        ),
        None,
        ("OPENAI_API_KEY",),
        _aider,
        anthropic_key="ANTHROPIC_API_KEY",
    ),
    "gemini": Preset(
        "gemini",
        # headless, the default approval mode offers no shell or write tool at all
        ("gemini", "-p", "{prompt}", "--approval-mode", "yolo"),
        "GEMINI_CLI_HOME",
        ("GEMINI_API_KEY",),
        _gemini,
        wire="gemini",
        with_mcp=_gemini_mcp,
    ),
    "opencode": Preset(
        "opencode",
        ("opencode", "run", "{prompt}"),
        None,
        ("OPENAI_API_KEY",),
        _opencode,
        anthropic_key="ANTHROPIC_API_KEY",
        with_mcp=_opencode_mcp,
    ),
}
