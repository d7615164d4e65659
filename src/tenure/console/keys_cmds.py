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

from tenure.console import jsonout, params
from tenure.console.app import app, err, out
from tenure.console.jsonout import JsonOption
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
TeamOpt = Annotated[str, typer.Option("--team", "-t", help="Team path.", callback=params.team)]


def keys_root(value: Path | None) -> Path:
    return key_dir(value) or DEFAULT_KEYS


def member_credentials(
    store: Store, keys: Path | None, insecure: bool, team: str, member: str, role: Role
) -> Credentials | None:
    """A member command's credentials, or None (unsigned) when the operator said
    ``--insecure`` — which is said on stderr and logged as ``security.unsigned``."""
    credentials = load_credentials(keys, insecure, team, member, role)
    if credentials is None:
        say_unsigned(store, team, member, role)
    return credentials


def load_credentials(
    keys: Path | None, insecure: bool, team: str, member: str, role: Role, *, named: bool = True
) -> Credentials | None:
    """A member's key from the key directory, or None for ``--insecure``; read before any
    store is opened, so a missing key is one line and nothing has been made. A command
    that goes on unsigned calls ``say_unsigned`` once its store is open. ``named``: the
    operator chose the id (else it was drawn at random, and no key can be made for it
    ahead of time: the line asks for ``--id``)."""
    if insecure:
        return None
    root = keys_root(keys)
    try:
        return Credentials.load(root, team, member, role)
    except ConfigError as exc:
        if not named and role == "work":
            raise ConfigError(
                f"no work key for this worker of team {team!r} in {root}: it has no --id "
                f"(so a random one); give it one and make its key: `tenure keys add --team "
                f"{team} --member ID`, then --id ID; or run unsigned with --insecure"
            ) from None
        raise ConfigError(f"{exc}; or run unsigned with --insecure") from None


def say_unsigned(store: Store, team: str, member: str, role: Role) -> None:
    """``--insecure``: said on stderr and logged as ``security.unsigned``."""
    err.print(
        f"[bold yellow]warning:[/] {escape(member)} runs unsigned (--insecure): any process "
        "that can reach the store can command it",
        soft_wrap=True,
    )
    store.append_event(team, "security.unsigned", {"member": member, "role": role})


@keys_app.command("init")
def init(
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="Team path.", callback=params.team)
    ] = None,
    member: Annotated[
        list[str] | None,
        typer.Option("--member", "-m", help="A member id (repeatable).", callback=params.ident),
    ] = None,
    plan: Annotated[
        Path | None, typer.Option("--plan", help="Every team of this plan (nested ones too).")
    ] = None,
    keys: KeysOption = None,
    as_json: JsonOption = False,
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
    pairs = {name: len(init_team(root, name, member or [])) // 2 for name in dict.fromkeys(teams)}
    if as_json:
        made = [{"team": name, "pairs_made": n} for name, n in pairs.items()]
        jsonout.emit("keys init", keys=str(root), teams=made)
        return
    for name, n in pairs.items():
        out.print(f"team {escape(name)}: {n} key pair(s) made in {escape(str(root))}")


@keys_app.command("add")
def add(
    team: TeamOpt,
    member: Annotated[
        str, typer.Option("--member", "-m", help="The member's id.", callback=params.ident)
    ],
    keys: KeysOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make (or replace) one member's key; give the member its `.key` file.

    Example: `tenure keys add --team acme --member w3`
    """
    root = keys_root(keys)
    add_member(root, check_team(team), member)
    if as_json:
        jsonout.emit("keys add", keys=str(root), team=team, member=member)
        return
    out.print(f"member {escape(member)} of {escape(team)}: new key in {escape(str(root))}")


@keys_app.command("rotate")
def rotate(
    team: TeamOpt,
    member: Annotated[
        str | None,
        typer.Option(
            "--member", "-m", help="Rotate this member's key instead.", callback=params.ident
        ),
    ] = None,
    revoke: Annotated[
        bool,
        typer.Option(
            "--revoke",
            help="The old lead key was stolen: do not keep its public key, so nothing it "
            "signed is signed again; its tasks wait for a person.",
        ),
    ] = False,
    keys: KeysOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replace the lead key (or one member's). The old lead public key is kept as
    `_lead.prev.pub`: the next leader signs the register anew with the new key (what
    the old one signed, and only that), so the team goes on. Give leaders the new
    `_lead.key` and members the new `_lead.pub` (a running member reads it when it
    changes); restart the leader. With `--revoke` nothing the old key signed is
    accepted again (docs/security.md: after a key was stolen).

    Example: `tenure keys rotate --team acme` (then copy `_lead.key`/`_lead.pub` out)
    """
    root = keys_root(keys)
    if member is not None:
        add_member(root, check_team(team), member)
    else:
        rotate_lead(root, check_team(team), keep_previous=not revoke)
    if as_json:
        jsonout.emit("keys rotate", keys=str(root), team=team, member=member, revoked=revoke)
    elif member is not None:
        out.print(f"member {escape(member)} of {escape(team)}: key rotated")
    else:
        kept = (
            "nothing the old key signed is accepted again"
            if revoke
            else "the next leader signs the register anew"
        )
        out.print(
            f"team {escape(team)}: lead key rotated ({kept}); give leaders the new _lead.key "
            "and restart the leader"
        )


@keys_app.command("show")
def show(team: TeamOpt, keys: KeysOption = None, as_json: JsonOption = False) -> None:
    """List a team's keys and their fingerprints (nothing secret is printed).

    Example: `tenure keys show --team acme`
    """
    root = keys_root(keys)
    folder = TeamKeys(root, check_team(team)).folder
    table = Table(title=f"keys of {escape(team)} in {escape(str(root))}", title_justify="left")
    for column in ("signer", "fingerprint", "private key here"):
        table.add_column(column)
    found = []
    for pub in sorted(folder.glob("_lead.pub")) + sorted((folder / "_members").glob("*.pub")):
        signer = "lead" if pub.name == "_lead.pub" else pub.stem
        private = pub.with_suffix(".key").exists()
        found.append({"signer": signer, "fingerprint": fingerprint(pub), "private_key": private})
        table.add_row(escape(signer), fingerprint(pub), "yes" if private else "no")
    if not table.row_count:
        raise ConfigError(
            f"no keys for team {team!r} in {root} (teams with keys: "
            f"{', '.join(teams_with_keys(root)) or 'none'}); make them with "
            f"tenure keys init --team {team}"
        )
    if as_json:
        jsonout.emit("keys show", team=team, keys=found)
        return
    out.print(table)


def teams_with_keys(root: Path) -> list[str]:
    """The team paths under a key directory that have a lead key."""
    return sorted(p.parent.relative_to(root).as_posix() for p in root.rglob("_lead.pub"))


def fingerprint(pub: Path) -> str:
    key = serialization.load_pem_public_key(pub.read_bytes())
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()[:16]
