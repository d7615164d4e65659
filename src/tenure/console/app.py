"""The ``tenure`` Typer application and the one place errors become a readable line.

Everything printed that a member may have written goes through ``console.safe``
(secrets redacted, control characters shown, markup escaped); a URL through
``redact_url``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from tenure.console import params
from tenure.console.aliases import AliasingGroup
from tenure.console.exits import Exit
from tenure.console.safe import safe_text
from tenure.executors.environment import ENV_ALLOW, allow_names
from tenure.protocol.errors import StoreLost, TenureError, UnreadableFile
from tenure.protocol.version import package_version
from tenure.store.url import ENV_VAR, default_url

app = typer.Typer(
    name="tenure",
    cls=AliasingGroup,
    help="Leader/follower teams of AI agents that survive their own failures.\n\n"
    "Example: `tenure demo`, then `tenure run plan.yaml --workers 4 --exec noop` and "
    "`tenure status`; `tenure COMMAND --help` shows each command with an example.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
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
        callback=params.store,
    ),
]
TeamOption = Annotated[
    str, typer.Option("--team", "-t", help="Team path, e.g. acme/research.", callback=params.team)
]
PassEnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        help=f"Pass this environment variable (or PREFIX*) to the commands, agents and checks "
        f"the team runs (repeatable; adds to {ENV_ALLOW}). Never {ENV_VAR} or TENURE_KEY*.",
        show_default=False,
    ),
]


def _show_version(value: bool) -> None:
    if value:
        out.print(f"tenure {package_version()}")
        raise typer.Exit(Exit.OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the version and exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Options that come before any command (the version, shell completion)."""


def pass_env(names: list[str] | None) -> None:
    """Let the executors of this process and the members it starts pass these variables."""
    allow_names(names or [])


def store_url(value: str | None) -> str:
    return value or default_url()


def fail(message: str, code: int = Exit.ERROR) -> typer.Exit:
    """Print one readable error line; return the Exit to raise."""
    err.print(f"[bold red]error:[/] {safe_text(message)}", soft_wrap=True)
    return typer.Exit(code)


def run() -> None:
    """Entry point: every error is one line on stderr, never a traceback. A TenureError
    exits ``Exit.ERROR`` (a lost store ``Exit.STORE_LOST``); a usage error (a bad flag,
    a missing argument, a file named that cannot be read) ``Exit.USAGE``, as ``--help``
    says."""
    try:
        code = app(standalone_mode=False)
    except StoreLost as exc:  # the store was replaced, emptied, or gone too long
        err.print(f"[bold red]error:[/] {safe_text(exc)}", soft_wrap=True)
        sys.exit(4)
    except UnreadableFile as exc:  # a file named on the command line: a usage error
        err.print(f"[bold red]error:[/] {safe_text(exc)}", soft_wrap=True)
        sys.exit(Exit.USAGE)
    except TenureError as exc:
        err.print(f"[bold red]error:[/] {safe_text(exc)}", soft_wrap=True)
        sys.exit(Exit.ERROR)
    except typer.TyperException as exc:  # what the parser refuses, before any command runs
        sys.exit(_usage_error(exc))
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted")
        sys.exit(Exit.INTERRUPTED)
    sys.exit(code if isinstance(code, int) else Exit.OK)


def _usage_error(exc: typer.TyperException) -> int:
    """Show a parser error as one line (a bare group's help page as the page itself)."""
    show = getattr(exc, "show", None)
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if "\n" in message.strip() and callable(show):  # `tenure keys` alone: its help
        show()
        return int(getattr(exc, "exit_code", Exit.USAGE))
    param = getattr(exc, "param", None)
    if isinstance(exc, typer.BadParameter) and param is not None and exc.message:
        message = f"{params.flag_name(param)}: {exc.message}"
    err.print(f"[bold red]error:[/] {safe_text(message)}", soft_wrap=True)
    return int(getattr(exc, "exit_code", Exit.USAGE))
