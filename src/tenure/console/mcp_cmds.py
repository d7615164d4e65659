"""``tenure mcp``: serve a team over MCP, to an agent bound to one task of one member
(the worker role) or to the operator's agent (``--operator``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from tenure.console import params
from tenure.console.app import StoreOption, app, fail, store_url
from tenure.console.keys_cmds import InsecureOption, KeysOption, load_credentials, say_unsigned
from tenure.console.mcp.member import member_running
from tenure.console.mcp.operator import operator_server
from tenure.console.mcp.serve import Endpoint, check_exposure, parse_endpoint, serve
from tenure.console.member_store import confirmed, patient
from tenure.console.stores import existing, require_team
from tenure.roles.member import FollowerConfig
from tenure.roles.member.bridge import Bridge
from tenure.roles.member.mcp.sdk import server_class
from tenure.roles.member.mcp.tools import worker_server
from tenure.store import open_store

MCP_CAPABILITY = "mcp"
"""Offered by every worker-role member: a plan task with ``capability: mcp`` goes only to one."""
ENV_TOKEN = "TENURE_MCP_TOKEN"


@app.command()
def mcp(
    team: Annotated[
        str | None,
        typer.Option(
            "--team", "-t", help="Team path (the operator: only this team).", callback=params.team
        ),
    ] = None,
    member: Annotated[
        str | None,
        typer.Option("--member", help="The member the agent works as.", callback=params.ident),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            help="Serve this task only (default: the first one assigned).",
            callback=params.ident,
        ),
    ] = None,
    operator: Annotated[
        bool,
        typer.Option(
            "--operator", help="Serve the operator's tools: status, inbox, answer, cancel."
        ),
    ] = False,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
            show_default=False,
        ),
    ] = None,
    public: Annotated[
        bool,
        typer.Option("--public", help="Allow --http on a non-loopback address (needs --token)."),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=ENV_TOKEN,
            help=f"Bearer token every HTTP request must carry (or {ENV_TOKEN}).",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    keys: KeysOption = None,
    insecure: InsecureOption = False,
    state_dir: Annotated[
        Path, typer.Option(help="Where the member keeps its highest-seen epoch.")
    ] = Path(".tenure"),
    member_ttl: Annotated[
        float,
        typer.Option(
            help=f"Liveness TTL in seconds ({params.MIN_TTL:g} to {params.MAX_TTL:g}).",
            callback=params.ttl(),
        ),
    ] = 3.0,
    capability: Annotated[
        list[str] | None,
        typer.Option(
            "--capability", "-c", help=f"A capability besides '{MCP_CAPABILITY}' (repeatable)."
        ),
    ] = None,
) -> None:
    """Serve a Tenure team over MCP (stdio, or streamable HTTP with --http).

    Worker role: the agent works as member ID on one task: read_task, report_progress,
    ask_question, wait_for_answer, submit_result. Its results are signed with the
    member's key and judged by the leader like any worker's. Operator role
    (--operator): status, inbox, answer, cancel. See docs/mcp.md.

    Example: `tenure mcp --team acme --member agent-1 --task write-report --store sqlite:///team.db`
    """
    endpoint = parse_endpoint(http) if http else None
    if endpoint is not None:
        check_exposure(endpoint, public=public, token=token)
    elif token or public:
        raise fail("--token and --public go with --http (stdio needs neither)")
    server_class()  # without the extra: one line, before anything is opened
    if operator:
        if member or task:
            raise fail("--member and --task are the worker role's; --operator serves no task")
        _serve_operator(store, team, endpoint, token, keys)
        return
    if not team or not member:
        raise fail("say which member the agent works as: --team T --member ID (or --operator)")
    config = FollowerConfig(
        team=team,
        member_id=member,
        capabilities=(MCP_CAPABILITY, *(capability or ())),
        member_ttl=member_ttl,
        state_dir=state_dir,
    )
    _serve_worker(store, config, task, keys, insecure, endpoint, token)


def _serve_operator(
    store: str | None,
    team: str | None,
    endpoint: Endpoint | None,
    token: str | None,
    keys: Path | None = None,
) -> None:
    with existing(store) as opened:
        require_team(opened, team)
        serve(operator_server(opened, team=team, keys=keys), endpoint, token=token)


def _serve_worker(
    store: str | None,
    config: FollowerConfig,
    task: str | None,
    keys: Path | None,
    insecure: bool,
    endpoint: Endpoint | None,
    token: str | None,
) -> None:
    stop = threading.Event()
    # the key before the store: a refusal makes no file, directory or key
    config.credentials = load_credentials(keys, insecure, config.team, config.member_id, "work")
    with open_store(store_url(store)) as raw:
        opened = patient(raw, team=config.team, member=config.member_id, stop=stop)
        if config.credentials is None:
            say_unsigned(opened, config.team, config.member_id, "work")
        bridge = Bridge(opened, config.team, config.member_id, task)
        with member_running(opened, config, bridge):
            serve(worker_server(bridge), endpoint, token=token)
        confirmed(opened)
