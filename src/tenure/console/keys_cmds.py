"""``tenure keys``: a team's credentials (make, add a member, rotate, show), and how the
member commands find theirs (``--keys``, ``$TENURE_KEYS``, ``--insecure``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated

import typer
from cryptography.hazmat.primitives import serialization
from rich.markup import escape
from rich.table import Table

from tenure.console.app import app, err, out
from tenure.coord import Credentials, key_dir
from tenure.coord.credentials import Role, TeamKeys, add_member, init_team, rotate_lead
from tenure.protocol import load_plan
from tenure.protocol.errors import ConfigError
from tenure.protocol.ids import check_team
from tenure.protocol.plan import team_tree
from tenure.store import Store

DEFAULT_KEYS = Path(".tenure") / "keys"

keys_app = typer.Typer(
    name="keys",
    help="A team's credentials: a lead key for its leaders, a key per member.\n\n"
    "Example: `tenure keys init --team acme --member w1 --member w2`",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
app.add_typer(keys_app)

KeysOption = Annotated[
    Path | None,
    typer.Option(
        "--keys",
        envvar="TENURE_KEYS",
        help="Key directory (tenure keys init); default .tenure/keys.",
        show_default=False,
    ),
]
InsecureOption = Annotated[
    bool,
    typer.Option(
        "--insecure",
        help="Run without credentials: any process that can reach the store can then "
        "command this member. Logged, and said on stderr.",
    ),
]
TeamOpt = Annotated[str, typer.Option("--team", "-t", help="Team path.")]


def keys_root(value: Path | None) -> Path:
    return key_dir(value) or DEFAULT_KEYS


def member_credentials(
    store: Store, keys: Path | None, insecure: bool, team: str, member: str, role: Role
) -> Credentials | None:
    """A member command's credentials, or None (unsigned) when the operator said
    ``--insecure`` — which is said on stderr and logged as ``security.unsigned``."""
    if insecure:
        err.print(
            f"[bold yellow]warning:[/] {escape(member)} runs unsigned (--insecure): any process "
            "that can reach the store can command it",
            soft_wrap=True,
        )
        store.append_event(team, "security.unsigned", {"member": member, "role": role})
        return None
    root = keys_root(keys)
    try:
        return Credentials.load(root, team, member, role)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; or run unsigned with --insecure") from None


@keys_app.command("init")
def init(
    team: Annotated[str | None, typer.Option("--team", "-t", help="Team path.")] = None,
    member: Annotated[
        list[str] | None, typer.Option("--member", "-m", help="A member id (repeatable).")
    ] = None,
    plan: Annotated[
        Path | None, typer.Option("--plan", help="Every team of this plan (nested ones too).")
    ] = None,
    keys: KeysOption = None,
) -> None:
    """Make a team's lead key (kept if it exists) and a key for each member named.

    Leaders need `_lead.key` and the members' `.pub` files; a worker needs its own
    `_members/ID.key` and `_lead.pub`. Files are owner-only.

    Example: `tenure keys init --team acme --member w1 --member w2`
    """
    teams = [check_team(team)] if team else []
    if plan is not None:
        teams += [each.team for each in team_tree(load_plan(plan))]
    if not teams:
        raise ConfigError("say which team: --team TEAM, or --plan PLAN for every team of a plan")
    root = keys_root(keys)
    for name in dict.fromkeys(teams):
        made = init_team(root, name, member or [])
        out.print(f"team {escape(name)}: {len(made) // 2} key pair(s) made in {escape(str(root))}")


@keys_app.command("add")
def add(
    team: TeamOpt,
    member: Annotated[str, typer.Option("--member", "-m", help="The member's id.")],
    keys: KeysOption = None,
) -> None:
    """Make (or replace) one member's key; give the member its `.key` file.

    Example: `tenure keys add --team acme --member w3`
    """
    root = keys_root(keys)
    add_member(root, check_team(team), member)
    out.print(f"member {escape(member)} of {escape(team)}: new key in {escape(str(root))}")


@keys_app.command("rotate")
def rotate(
    team: TeamOpt,
    member: Annotated[
        str | None, typer.Option("--member", "-m", help="Rotate this member's key instead.")
    ] = None,
    keys: KeysOption = None,
) -> None:
    """Replace the lead key (or one member's). Restart the members with the new files:
    what the old key signed is refused from then on.

    Example: `tenure keys rotate --team acme` (then copy `_lead.key`/`_lead.pub` out)
    """
    root = keys_root(keys)
    if member is not None:
        add_member(root, check_team(team), member)
        out.print(f"member {escape(member)} of {escape(team)}: key rotated")
        return
    rotate_lead(root, check_team(team))
    out.print(f"team {escape(team)}: lead key rotated; give leaders the new _lead.key")


@keys_app.command("show")
def show(team: TeamOpt, keys: KeysOption = None) -> None:
    """List a team's keys and their fingerprints (nothing secret is printed).

    Example: `tenure keys show --team acme`
    """
    root = keys_root(keys)
    folder = TeamKeys(root, check_team(team)).folder
    table = Table(title=f"keys of {escape(team)} in {escape(str(root))}", title_justify="left")
    for column in ("signer", "fingerprint", "private key here"):
        table.add_column(column)
    for pub in sorted(folder.glob("_lead.pub")) + sorted((folder / "_members").glob("*.pub")):
        signer = "lead" if pub.name == "_lead.pub" else pub.stem
        table.add_row(escape(signer), fingerprint(pub), "yes" if pub.with_suffix(".key").exists() else "no")
    out.print(table if table.row_count else f"no keys for {escape(team)}: run tenure keys init")


def fingerprint(pub: Path) -> str:
    key = serialization.load_pem_public_key(pub.read_bytes())
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()[:16]
