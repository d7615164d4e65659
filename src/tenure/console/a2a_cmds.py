"""``tenure a2a serve``: a team as an A2A agent, for any A2A client to send tasks to."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from tenure.console import params
from tenure.console.app import StoreOption, app, err, fail, out, store_url
from tenure.console.keys_cmds import (
    InsecureOption,
    KeysOption,
    keys_root,
    load_credentials,
    say_unsigned,
)
from tenure.console.processes import Terminated, terminated_on_signals
from tenure.coord import Credentials
from tenure.coord.credentials import init_team
from tenure.executors import SPEC_HELP, resolve_executor
from tenure.executors.a2a_sdk import require_a2a
from tenure.protocol.secrets import redact_url
from tenure.roles.member.bearer import check_exposure
from tenure.store import open_store

ENV_TOKEN = "TENURE_A2A_TOKEN"

a2a_app = typer.Typer(
    name="a2a",
    help="A team as an A2A agent (Agent2Agent protocol, 1.0).\n\n"
    "Example: `tenure a2a serve --team front --exec python:agent:work`",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
app.add_typer(a2a_app)


@a2a_app.command("serve")
def serve(
    team: Annotated[
        str, typer.Option("--team", "-t", help="The team served.", callback=params.team)
    ],
    store: StoreOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(help="Port (0: a free one).", callback=params.between(0, 65535))
    ] = 8700,
    executor: Annotated[
        str | None,
        typer.Option(
            "--exec",
            help=f"Run the team's workers in this process with this executor ({SPEC_HELP}); "
            "without it, `tenure worker --queue` processes on the store do the work.",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", "-w", help="Workers with --exec.", callback=params.between(1, 64)
        ),
    ] = 2,
    workdir: Annotated[Path | None, typer.Option(help="Where tasks and their checks run.")] = None,
    description: Annotated[str, typer.Option(help="The agent card's description.")] = "",
    public: Annotated[
        bool,
        typer.Option("--public", help="Allow --host beyond loopback (needs --token)."),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=ENV_TOKEN,
            help=f"Bearer token every call must carry (or {ENV_TOKEN}); the card says so.",
            show_default=False,
        ),
    ] = None,
    keys: KeysOption = None,
    insecure: InsecureOption = False,
) -> None:
    """Serve a team as an A2A agent: its card at /.well-known/agent-card.json, JSON-RPC
    at / (SendMessage, SendStreamingMessage, GetTask, CancelTask; message/send and
    message/stream too).

    Each A2A task becomes one task of the team: a text part is its goal, or a data part
    holds the task (goal, acceptance_criteria, checks without commands, output_schema,
    deadline_seconds). A team of its own runs in queue mode; a team a leader leads gets
    the task registered for that leader (which must be running). A task waiting for a
    person is input-required; the caller's next message on it is the answer. Beyond
    loopback, --public and a token are required. The first line printed is the URL.
    Stop with Ctrl-C.

    Example: `tenure a2a serve --team front --exec "command:python3 agent.py" --port 0 --insecure`

    Example: `tenure a2a serve --team front --store redis://127.0.0.1:6379/0` (with
    `tenure worker --queue --team front` processes doing the work)
    """
    check_exposure(host, public=public, token=token, flag="--host")
    if public and not token:
        raise fail("--public goes with --token: a caller must prove it may give the team work")
    require_a2a(server=True)
    from tenure.roles.teams.a2a.running import ServedTeam

    run_with = resolve_executor(executor, field="--exec") if executor else None
    ids = [f"a2a-w{n}" for n in range(1, workers + 1)] if run_with is not None else []
    url = store_url(store)
    stop = threading.Event()
    lead = load_credentials(keys, insecure, team, "a2a", "lead")  # before the store is made
    try:
        with terminated_on_signals(), open_store(url) as opened:
            if lead is None:
                say_unsigned(opened, team, "a2a", "lead")
            served = ServedTeam(
                opened,
                team,
                host=host,
                port=port,
                executor=run_with,
                worker_ids=ids,
                credentials=lead,
                worker_credentials=_worker_keys(keys, team, ids, lead),
                workdir=workdir,
                description=description,
                token=token,
            )
            served.run(stop, lambda at: _ready(at, team, redact_url(url)))
    except Terminated as exc:
        err.print(f"tenure a2a serve: {exc}")
        raise typer.Exit(128 + exc.signum) from None
    except OSError as exc:
        raise fail(f"the A2A server stopped: {exc}") from None


def _ready(url: str, team: str, store: str) -> None:
    out.print(url, soft_wrap=True)
    err.print(
        f"serving team {team} of {store} as an A2A agent; card: {url}.well-known/agent-card.json"
    )


def _worker_keys(
    keys: Path | None, team: str, ids: list[str], lead: Credentials | None
) -> list[Credentials | None]:
    """The in-process workers' keys (made if missing), or none when unsigned."""
    if lead is None or not ids:
        return [None] * len(ids)
    root = keys_root(keys)
    init_team(root, team, ids)
    return [Credentials.load(root, team, member, "work") for member in ids]
