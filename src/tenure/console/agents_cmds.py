"""``tenure agents``: the agent CLI presets, whether each is installed here, and the
exact command line (environment and home files too) an attempt would run; plus the
``--agent-model`` / ``--agent-bare`` / ``--agent-arg`` options ``tenure code`` shares."""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import app, out
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.agent_model import ENV_AGENT_MODEL, AgentModel
from tenure.executors.agent_presets import PRESETS
from tenure.executors.agent_probe import VERSION_TIMEOUT, Installed, probe_all
from tenure.protocol.secrets import redact_value

AgentModelOption = Annotated[
    str | None,
    typer.Option(
        "--agent-model",
        help="Point the agent CLI at this model: PROVIDER:MODEL[@BASE_URL], like "
        f"TENURE_MODEL (e.g. openai:qwen2.5-coder@http://localhost:8080/v1); default "
        f"{ENV_AGENT_MODEL}. Each preset gets it in its own configuration in the "
        "attempt's home.",
        show_default=False,
    ),
]
AgentBareOption = Annotated[
    bool,
    typer.Option(
        "--agent-bare",
        help="Run the CLI in its small-prompt mode (claude --bare: about 4K tokens of "
        "system prompt instead of about 76K; for models with a small context).",
    ),
]
AgentArgOption = Annotated[
    list[str] | None,
    typer.Option(
        "--agent-arg",
        help="Append this argument to the agent's command line (repeatable, in order; "
        "placeholders {worktree} {task_file} {result_file} {home} are filled in).",
        show_default=False,
    ),
]
AgentMcpOption = Annotated[
    bool,
    typer.Option(
        "--agent-mcp",
        help="The agent reports over its attempt's MCP server (read_task, report_progress, "
        "submit_result) instead of a result file; the preset writes the server into the "
        "CLI's own MCP configuration.",
    ),
]


def agent_from_options(
    spec: str,
    *,
    model: str | None,
    bare: bool,
    extra_args: list[str] | None,
    mcp: bool = False,
    **kwargs: Any,
) -> AgentCLI:
    """The agent ``tenure code`` and ``tenure agents`` build from the same options."""
    cli = AgentCLI.from_spec(
        spec,
        model=AgentModel.from_option(model),
        bare=bare,
        extra_args=tuple(extra_args or ()),
        **kwargs,
    )
    return cli.with_mcp() if mcp else cli


@app.command("agents")
def agents(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="PRESET", help="Only these presets (or script:CMD); default all."),
    ] = None,
    agent_model: AgentModelOption = None,
    agent_bare: AgentBareOption = False,
    agent_arg: AgentArgOption = None,
    agent_mcp: AgentMcpOption = False,
    as_json: JsonOption = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds each `CLI --version` may take.",
            callback=params.seconds(0.1),
        ),
    ] = VERSION_TIMEOUT,
) -> None:
    """The agent CLI presets: installed or not (on PATH, and `--version`), and the exact
    command line an attempt runs, with its placeholders ({prompt} {worktree} {home}...),
    the environment it sets and the files it writes in the attempt's home.

    Example: `tenure agents codex --agent-model openai:qwen2.5-coder@http://localhost:8080/v1`
    """
    chosen = list(
        names
        or (
            n
            for n, p in PRESETS.items()
            if (p.bare or not agent_bare) and (p.with_mcp or not agent_mcp)
        )
    )
    clis = [
        agent_from_options(
            name, model=agent_model, bare=agent_bare, extra_args=agent_arg, mcp=agent_mcp
        )
        for name in chosen
    ]
    found = probe_all([cli.template[0] for cli in clis], timeout=timeout)
    rows = [describe(cli, installed) for cli, installed in zip(clis, found, strict=True)]
    if as_json:
        jsonout.emit("agents", agents=rows)
        return
    table = Table(title="agent CLIs", title_justify="left", show_lines=True)
    for column in ("preset", "installed", "command line (and what it sets in its home)"):
        table.add_column(column, overflow="fold")
    for row in rows:
        # what an installed CLI printed (its --version) is shown, never obeyed
        table.add_row(safe_text(row["name"]), safe_text(_installed(row)), safe_text(_command(row)))
    out.print(table)


def describe(cli: AgentCLI, installed: Installed) -> dict[str, Any]:
    """What one agent runs, as data (keys masked): ``tenure agents --json`` prints it."""
    home_env = cli.home_vars("{home}")
    row = {
        "name": cli.name,
        "program": installed.program,
        "installed": installed.path is not None,
        "path": installed.path,
        "version": installed.version,
        "problem": installed.problem,
        "argv": list(cli.template),
        "command": shlex.join(cli.template),
        "env": {**home_env, **cli.env},
        "pass_env": list(cli.pass_env),
        "files": dict(cli.setup.files),
        "in_sandbox": dict(cli.in_sandbox),
    }
    masked: dict[str, Any] = redact_value(row)
    return masked


def _installed(row: dict[str, Any]) -> str:
    if not row["installed"]:
        return "no (not on PATH)"
    return f"yes: {row['version']}" if row["version"] else f"yes ({row['problem']})"


def _command(row: dict[str, Any]) -> str:
    env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in row["env"].items())
    lines = [f"{env} {row['command']}" if env else row["command"]]
    if row["pass_env"]:
        lines.append("passes from your environment: " + ", ".join(row["pass_env"]))
    lines += [f"writes {{home}}/{name}" for name in row["files"]]
    lines += [f"in Tenure's sandbox: {a} -> {b}" for a, b in row["in_sandbox"].items()]
    return "\n".join(lines)
