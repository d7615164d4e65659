"""The ``tenure`` Typer application and the one place errors become a readable line.

Everything printed that a member may have written goes through ``console.safe``
(secrets redacted, control characters shown, markup escaped); a URL through
``redact_url``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from tenure.console.safe import safe_text
from tenure.executors.environment import ENV_ALLOW, allow_names
from tenure.protocol.errors import TenureError
from tenure.store.url import ENV_VAR, default_url

app = typer.Typer(
    name="tenure",
    help="Leader/follower teams of AI agents that survive their own failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        envvar=ENV_VAR,
        help="Store URL: sqlite:///PATH (default .tenure/state.db) or redis://HOST:PORT/DB.",
        show_default=False,
    ),
]
TeamOption = Annotated[str, typer.Option("--team", "-t", help="Team path, e.g. acme/research.")]
PassEnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        help=f"Pass this environment variable (or PREFIX*) to the commands, agents and checks "
        f"the team runs (repeatable; adds to {ENV_ALLOW}). Never {ENV_VAR} or TENURE_KEY*.",
        show_default=False,
    ),
]


def pass_env(names: list[str] | None) -> None:
    """Let the executors of this process and the members it starts pass these variables."""
    allow_names(names or [])


def store_url(value: str | None) -> str:
    return value or default_url()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one readable error line; return the Exit to raise."""
    err.print(f"[bold red]error:[/] {safe_text(message)}", soft_wrap=True)
    return typer.Exit(code)


def run() -> None:
    """Entry point: a TenureError is one line on stderr and exit status 1, never a traceback."""
    try:
        app(standalone_mode=True)
    except TenureError as exc:
        err.print(f"[bold red]error:[/] {safe_text(exc)}", soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
