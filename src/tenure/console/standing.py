"""Where a plan stands in its store before a run or a leader starts: new, resumed,
finished already (said, nothing to do), changed (refused: ``tenure replan``), or
started over with ``--fresh``. Shared by ``tenure run`` and ``tenure leader``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tenure.console.app import fail, out
from tenure.console.keys_cmds import keys_root
from tenure.console.safe import safe_text
from tenure.coord import Credentials
from tenure.protocol import Plan
from tenure.protocol.words import counted
from tenure.roles.register.standing import plan_standing
from tenure.roles.teams.fresh import start_over
from tenure.store import Store

FreshOption = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Start the plan over: the team's register is cleared (attempt numbers go on).",
    ),
]


def settle_standing(
    store: Store, plan: Plan, *, fresh: bool = False, credentials: Credentials | None = None
) -> bool:
    """Where ``plan`` stands in the store: False (said on stdout) when its team finished
    this very plan already; refused with one line when the team runs a different plan.
    ``fresh``: the team's register is cleared and the plan starts over."""
    standing = plan_standing(store, plan)
    if fresh and standing.kind != "new":
        cleared = start_over(store, plan, credentials=credentials)
        out.print(
            f"{safe_text(plan.team)}: starting over ({counted(cleared, 'task')} cleared; attempt "
            "numbers go on)",
            soft_wrap=True,
        )
        return True
    if standing.kind in ("changed", "interrupted"):
        raise fail(standing.describe())
    if standing.kind == "done":
        out.print(f"{safe_text(plan.team)}: {safe_text(standing.describe())}", soft_wrap=True)
        return False
    return True


def lead_key(keys: Path | None, team: str) -> Credentials | None:
    """The team's lead key, if the key directory has one (a fresh start signs with it)."""
    root = keys_root(keys)
    if not (root / team / "_lead.key").exists():
        return None
    return Credentials.load(root, team, "operator", "lead")
