"""The operator's side: ``tenure inbox``, ``tenure answer`` and ``tenure cancel``.

The rules are the runtime's (``tenure.roles.teams.inbox``); these commands parse and print."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, out
from tenure.console.jsonout import JsonOption
from tenure.console.keys_cmds import KeysOption, keys_root
from tenure.console.safe import safe_text
from tenure.console.state_cmds import age
from tenure.console.stores import existing, require_team
from tenure.roles.teams import inbox as runtime
from tenure.roles.teams.reading import state_of

TeamArg = Annotated[str, typer.Option("--team", "-t", help="Team path.", callback=params.team)]


@app.command()
def inbox(
    store: StoreOption = None,
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="Only this team.", callback=params.team)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the tasks waiting for a person: blocked questions, refusals, exhausted retries.

    Example: `tenure inbox --team demo`
    """
    with existing(store) as opened:
        require_team(opened, team)
        items = runtime.inbox(opened, [team] if team else None)
    if as_json:
        jsonout.emit("inbox", items=[_item(item) for item in items])
        return
    if not items:
        out.print("the inbox is empty")
        return
    table = Table(title="inbox", title_justify="left")
    for column in ("team", "task", "waiting", "attempts", "why"):
        table.add_column(column, overflow="fold")
    for item in items:
        table.add_row(
            safe_text(item.team),
            safe_text(item.task.task_id),
            age(item.waiting_seconds),
            str(item.task.attempt),
            safe_text(str(item.why)),
        )
    out.print(table)


def _item(item: runtime.InboxItem) -> dict[str, object]:
    return {
        "team": item.team,
        "task_id": item.task.task_id,
        "state": state_of(item.task),
        "waiting_seconds": round(item.waiting_seconds, 3),
        "attempts": item.task.attempt,
        "why": str(item.why),
    }


@app.command()
def answer(
    task_id: Annotated[str, typer.Argument(metavar="TASK", help="The blocked task.")],
    text: Annotated[
        str, typer.Argument(metavar="TEXT", help="Your answer; the task is re-queued with it.")
    ],
    store: StoreOption = None,
    team: TeamArg = "default",
    keys: KeysOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a blocked task: the answer joins its Q&A and the task is re-queued.

    In a nested team, once its last waiting task is answered, the blocked composite
    task of the parent team is re-queued too (and so on upward). A signed team's
    register is written with its lead key (the key directory, default .tenure/keys).

    Example: `tenure answer acme-price "Use the EU list price" --team demo`
    """
    with existing(store) as opened:
        require_team(opened, team)
        answered = runtime.answer(opened, team, task_id, text, keys=keys_root(keys))
    if as_json:
        requeued = [{"team": p, "task_id": c} for p, c in answered.requeued]
        jsonout.emit("answer", team=team, task_id=task_id, requeued=requeued)
        return
    out.print(f"[green]answered[/] {safe_text(task_id)}: re-queued with your answer")
    for parent, composite in answered.requeued:
        out.print(
            f"[green]re-queued[/] {safe_text(composite)} in {safe_text(parent)}: "
            "its nested team has no more questions"
        )


@app.command()
def cancel(
    task_id: Annotated[str, typer.Argument(metavar="TASK", help="The task to cancel.")],
    store: StoreOption = None,
    team: TeamArg = "default",
    reason: Annotated[
        str, typer.Option(help="Why; recorded and sent to the worker.")
    ] = "cancelled by operator",
    keys: KeysOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a task; a worker running it is told to stop. A signed team's register is
    written with its lead key (the key directory, default .tenure/keys).

    Example: `tenure cancel acme-price --team demo --reason "vendor dropped"`
    """
    with existing(store) as opened:
        require_team(opened, team)
        runtime.cancel(opened, team, task_id, reason, keys=keys_root(keys))
    if as_json:
        jsonout.emit("cancel", team=team, task_id=task_id, reason=reason)
        return
    out.print(f"[yellow]cancelled[/] {safe_text(task_id)}")
