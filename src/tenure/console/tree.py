"""The tree of nested teams: one row per team with its leader, epoch, members and
task counts, indented under its parent path."""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from tenure.console.safe import safe_text
from tenure.store import Store

COUNTED = ("done", "running", "review", "queued", "blocked", "failed", "cancelled")


def subtree(teams: list[str], root: str | None) -> list[str]:
    """``root`` and the teams below it (all teams when None), sorted by path."""
    if root is None:
        return sorted(teams)
    root = root.rstrip("/")
    found = {t for t in teams if t == root or t.startswith(root + "/")}
    return sorted(found | {root})


def team_tree_table(store: Store, teams: list[str]) -> Table:
    """One row per team, children indented under their parent path."""
    table = Table(title="teams", title_justify="left")
    for column in ("team", "leader", "epoch", "members", "tasks"):
        table.add_column(column, overflow="fold")
    shown = set(teams)
    for team in teams:
        depth, parent = 0, team
        while "/" in parent:  # indent under the nearest ancestor that is shown
            parent = parent.rsplit("/", 1)[0]
            if parent in shown:
                depth += 1
        lease = store.current_lease(team)
        states: Counter[str] = Counter(t.state for t in store.tasks(team))
        table.add_row(
            "  " * depth + safe_text(team if depth == 0 else team.rsplit("/", 1)[1]),
            safe_text(lease.holder) if lease else "vacant",
            str(store.current_epoch(team)),
            str(len(store.members(team))),
            ", ".join(f"{states[s]} {s}" for s in COUNTED if states[s]) or "-",
        )
    return table
