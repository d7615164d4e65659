"""The operator's side: ``tenure inbox``, ``tenure answer`` and ``tenure cancel``.

The rules are the runtime's (``tenure.roles.teams.inbox``); these commands parse and print."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tenure.console.app import StoreOption, app, out, store_url
from tenure.console.safe import safe_text
from tenure.console.state_cmds import age
from tenure.roles.teams import inbox as runtime
from tenure.store import open_store

TeamArg = Annotated[str, typer.Option("--team", "-t", help="Team path.")]


@app.command()
def inbox(
    store: StoreOption = None,
    team: Annotated[str | None, typer.Option("--team", "-t", help="Only this team.")] = None,
) -> None:
    """List the tasks waiting for a person: blocked questions, refusals, exhausted retries.

    Example: `tenure inbox --team demo`
    """
    with open_store(store_url(store)) as opened:
        items = runtime.inbox(opened, [team] if team else None)
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


@app.command()
def answer(
    task_id: Annotated[str, typer.Argument(metavar="TASK", help="The blocked task.")],
    text: Annotated[str, typer.Argument(help="Your answer; the task is re-queued with it.")],
    store: StoreOption = None,
    team: TeamArg = "default",
) -> None:
    """Answer a blocked task: the answer joins its Q&A and the task is re-queued.

    In a nested team, once its last waiting task is answered, the blocked composite
    task of the parent team is re-queued too (and so on upward).

    Example: `tenure answer acme-price "Use the EU list price" --team demo`
    """
    with open_store(store_url(store)) as opened:
        answered = runtime.answer(opened, team, task_id, text)
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
) -> None:
    """Cancel a task; a worker running it is told to stop.

    Example: `tenure cancel acme-price --team demo --reason "vendor dropped"`
    """
    with open_store(store_url(store)) as opened:
        runtime.cancel(opened, team, task_id, reason)
    out.print(f"[yellow]cancelled[/] {safe_text(task_id)}")
