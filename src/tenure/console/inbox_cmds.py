"""The operator's side: ``tenure inbox``, ``tenure answer`` and ``tenure cancel``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tenure.console.app import StoreOption, app, fail, out, store_url
from tenure.console.state_cmds import age
from tenure.protocol import TenureError
from tenure.protocol.errors import NotFound
from tenure.protocol.messages import CancelMessage
from tenure.roles.features.nested.parent import child_team
from tenure.roles.member.wire import member_queue
from tenure.store import Store, TaskRecord, open_store

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
        table = Table(title="inbox", title_justify="left")
        for column in ("team", "task", "waiting", "attempts", "why"):
            table.add_column(column, overflow="fold")
        now = opened.now()
        rows = 0
        for name in [team] if team else opened.teams():
            for task in opened.tasks(name):
                if task.state in ("blocked", "failed"):
                    why = task.data.get("question") or task.reason
                    table.add_row(
                        name, task.task_id, age(now - task.updated_at), str(task.attempt), str(why)
                    )
                    rows += 1
        out.print(table if rows else "the inbox is empty")


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
        task = _task(opened, team, task_id)
        if task.state not in ("blocked", "failed"):
            raise fail(f"task {task_id!r} is {task.state}, not waiting for an answer")
        qa = [
            *task.data.get("qa", []),
            {"question": task.data.get("question") or task.reason, "answer": text},
        ]
        data = {**task.data, "qa": qa, "attempt_base": task.attempt}
        data.pop("question", None)
        opened.transition(
            team,
            task_id,
            epoch=opened.current_epoch(team),
            expect=[task.state],
            to="queued",
            version=task.version,
            data=data,
            assignee=None,
            reason="answered by operator",
        )
        opened.append_event(team, "inbox.answered", {"task_id": task_id, "answer": text})
        ancestors = requeue_ancestors(opened, team, task_id)
    out.print(f"[green]answered[/] {task_id}: re-queued with your answer")
    for parent, composite in ancestors:
        out.print(
            f"[green]re-queued[/] {composite} in {parent}: its nested team has no more questions"
        )


def requeue_ancestors(store: Store, team: str, task_id: str) -> list[tuple[str, str]]:
    """Re-queue the blocked composite task(s) whose nested team is ``team``, once that
    team has nothing left waiting for a person; then their own parents, upward.
    The next sub-leader attempt adopts the child register and runs the answered task."""
    requeued: list[tuple[str, str]] = []
    child, answered = team, f"{team} {task_id}"
    while "/" in child:
        if any(t.state in ("blocked", "failed") for t in store.tasks(child)):
            break  # the nested team still waits for a person: the parent keeps waiting too
        parent = child.rsplit("/", 1)[0]
        waiting = [
            t
            for t in store.tasks(parent)
            if t.state == "blocked" and child_team(parent, t.task_id, t.spec) == child
        ]
        if not waiting:
            break
        for task in waiting:
            data = {**task.data, "attempt_base": task.attempt}
            data.pop("question", None)
            store.transition(
                parent,
                task.task_id,
                epoch=store.current_epoch(parent),
                expect=["blocked"],
                to="queued",
                version=task.version,
                data=data,
                assignee=None,
                reason=f"re-queued: {answered} was answered",
            )
            store.append_event(
                parent, "inbox.requeued", {"task_id": task.task_id, "answered": answered}
            )
            requeued.append((parent, task.task_id))
        child = parent
    return requeued


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
        task = _task(opened, team, task_id)
        if task.state in ("done", "cancelled"):
            raise fail(f"task {task_id!r} is already {task.state}")
        epoch = opened.current_epoch(team)
        opened.transition(
            team,
            task_id,
            epoch=epoch,
            expect=[task.state],
            to="cancelled",
            version=task.version,
            reason=reason,
        )
        if task.assignee:
            _tell_worker(opened, team, task, epoch, reason)
    out.print(f"[yellow]cancelled[/] {task_id}")


def _task(store: Store, team: str, task_id: str) -> TaskRecord:
    try:
        return store.get_task(team, task_id)
    except NotFound:
        known = ", ".join(t.task_id for t in store.tasks(team)[:10]) or "none"
        raise fail(f"team {team!r} has no task {task_id!r} (tasks: {known})") from None


def _tell_worker(store: Store, team: str, task: TaskRecord, epoch: int, reason: str) -> None:
    message = CancelMessage.model_validate(
        {
            "team": team,
            "from": "operator",
            "to": task.assignee,
            "epoch": epoch,
            "body": {"task_id": task.task_id, "reason": reason},
        }
    )
    try:
        store.send(
            team, member_queue(str(task.assignee)), message.model_dump(mode="json", by_alias=True)
        )
    except TenureError:
        pass  # the worker also sees the cancelled state on its next heartbeat
