"""The ``tenure`` Typer application and the one place errors become a readable line."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

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


def store_url(value: str | None) -> str:
    return value or default_url()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one readable error line; return the Exit to raise."""
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def run() -> None:
    """Entry point: a TenureError is one line on stderr and exit status 1, never a traceback."""
    try:
        app(standalone_mode=True)
    except TenureError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
