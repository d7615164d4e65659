"""The operator's side of a team: what waits for a person, answering it, cancelling.

These are the rules the CLI (``tenure inbox``, ``answer``, ``cancel``) and the
Python API share; they print nothing. An answer joins the task's Q&A and gives it
fresh attempts; in a nested team, once its last waiting task is answered, the
blocked composite task above it is re-queued too (and so on upward). Cancelling
tells the member running the task to stop.

In a signed team the operator writes as its leaders do, with the team's lead key
(``keys``, the key directory): every write is sealed (``roles.register.seal``). A
register whose tasks are signed is not written without that key — the team's leader
would refuse the write as tampering. A finished task its leader set aside as
tampered with waits here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tenure.coord import Credentials
from tenure.coord.credentials import TeamKeys
from tenure.protocol import TenureError
from tenure.protocol.errors import ConfigError, NotFound
from tenure.protocol.messages import CancelMessage
from tenure.protocol.taskspec import Answer
from tenure.roles.member import member_queue
from tenure.roles.register import WAITING_STATES, Register, Task, read_task
from tenure.roles.register.tampered import apply_marks
from tenure.store import TERMINAL_STATES, Store

__all__ = ["Answered", "InboxItem", "answer", "cancel", "inbox", "requeue_ancestors"]


@dataclass(frozen=True)
class InboxItem:
    """A task waiting for a person, and why."""

    team: str
    task: Task
    why: str
    waiting_seconds: float


@dataclass(frozen=True)
class Answered:
    """An answer taken: the task re-queued, and composite tasks above it re-queued too."""

    task: Task
    requeued: list[tuple[str, str]]  # (team, task id) upward, nearest first


def inbox(store: Store, teams: list[str] | None = None) -> list[InboxItem]:
    """Every task of ``teams`` (default: every team) that waits for a person: blocked,
    failed, or finished but set aside as tampered with."""
    now = store.now()
    found = []
    for team in teams if teams is not None else store.teams():
        for task in apply_marks(store, team, [read_task(r) for r in store.tasks(team)]):
            if task.tamper is not None:
                why = f"{task.problem} (claimed by {task.tamper.claimed}); start over with --fresh"
                found.append(InboxItem(team, task, why, now - task.updated_at))
            elif task.state in WAITING_STATES:
                why = task.data.question or task.reason
                found.append(InboxItem(team, task, why, now - task.updated_at))
    return found


def _operator(store: Store, team: str, keys: Path | None, task: Task | None = None) -> Register:
    """The operator writes at the team's current epoch: a person outranks no leader,
    but a leader that moves on later refuses nothing the operator wrote. With the
    team's lead key in ``keys`` its writes are sealed; a signed ``task`` is not
    written without it."""
    credentials = None
    if keys is not None and (TeamKeys(keys, team).folder / "_lead.key").exists():
        credentials = Credentials.load(keys, team, "operator", "lead")
    if credentials is None and task is not None and task.spec.signature is not None:
        raise ConfigError(
            f"task {task.task_id!r} of team {team!r} is signed: writing it takes the team's "
            f"lead key (--keys DIR holding {team}/_lead.key); its leader would refuse it"
        )
    return Register(store, team, lambda: store.current_epoch(team), credentials)


def find(store: Store, team: str, task_id: str) -> Task:
    """The task, or one line naming the tasks the team has."""
    try:
        return read_task(store.get_task(team, task_id))
    except NotFound:
        known = ", ".join(t.task_id for t in store.tasks(team)[:10]) or "none"
        raise ConfigError(f"team {team!r} has no task {task_id!r} (tasks: {known})") from None


def _readable(task: Task) -> Task:
    """The task, if its register entry can be read: an operator's write on one that
    cannot would replace what is stored (answers, spend) with what was not read."""
    if task.problem is not None:
        raise ConfigError(
            f"task {task.task_id!r} cannot be read from the register, so nothing was written "
            f"({task.problem}); give it a new definition with `tenure replan`, or start "
            "over with --fresh"
        )
    return task


def answer(
    store: Store, team: str, task_id: str, text: str, *, keys: Path | None = None
) -> Answered:
    """Answer a waiting task: its Q&A gets the answer and it is re-queued with fresh
    attempts; composite tasks above a nested team with nothing left waiting follow.
    A task that has not started yet (queued, e.g. behind a task that waits for a
    person) may be answered ahead of time: its first attempt carries the answer."""
    task = _readable(find(store, team, task_id))
    ahead = task.state == "queued" and not task.assignee  # not started: guidance ahead of time
    if task.state not in WAITING_STATES and not ahead:
        raise ConfigError(f"task {task_id!r} is {task.state}, not waiting for an answer")
    qa = [*task.data.qa, Answer(question=task.data.question or task.reason, answer=text)]
    data = task.data.with_(qa=qa, attempt_base=task.attempt, question=None)
    moved = _operator(store, team, keys, task).move(
        task, "queued", data=data, assignee=None, reason="answered by operator"
    )
    store.append_event(team, "inbox.answered", {"task_id": task_id, "answer": text})
    return Answered(moved, requeue_ancestors(store, team, task_id, keys=keys))


def requeue_ancestors(
    store: Store, team: str, task_id: str, *, keys: Path | None = None
) -> list[tuple[str, str]]:
    """Re-queue the blocked composite task(s) whose nested team is ``team``, once that
    team has nothing left waiting for a person; then their own parents, upward.
    The next sub-leader attempt adopts the child register and runs the answered task."""
    requeued: list[tuple[str, str]] = []
    child, answered = team, f"{team} {task_id}"
    while "/" in child:
        if any(t.state in WAITING_STATES for t in store.tasks(child)):
            break  # the nested team still waits for a person: the parent keeps waiting too
        parent = child.rsplit("/", 1)[0]
        register = _operator(store, parent, keys)
        waiting = [
            t for t in register.tasks() if t.state == "blocked" and t.spec.child_team(parent) == child
        ]
        if not waiting:
            break
        for task in waiting:
            _operator(store, parent, keys, task)  # refused if it is signed and we hold no key
            data = task.data.with_(attempt_base=task.attempt, question=None)
            register.move(
                task, "queued", data=data, assignee=None, reason=f"re-queued: {answered} was answered"
            )
            store.append_event(
                parent, "inbox.requeued", {"task_id": task.task_id, "answered": answered}
            )
            requeued.append((parent, task.task_id))
        child = parent
    return requeued


def cancel(
    store: Store,
    team: str,
    task_id: str,
    reason: str = "cancelled by operator",
    *,
    keys: Path | None = None,
) -> Task:
    """Cancel a task; the member running it is told to stop (it also sees the
    cancelled state on its next heartbeat)."""
    task = _readable(find(store, team, task_id))
    if task.state in TERMINAL_STATES:
        raise ConfigError(f"task {task_id!r} is already {task.state}")
    register = _operator(store, team, keys, task)
    moved = register.move(task, "cancelled", reason=reason)
    if task.assignee:
        _tell_worker(store, team, task, register.epoch(), reason)
    return moved


def _tell_worker(store: Store, team: str, task: Task, epoch: int, reason: str) -> None:
    message = CancelMessage.model_validate(
        {
            "team": team,
            "from": "operator",
            "to": task.assignee,
            "epoch": max(epoch, 1),
            "body": {"task_id": task.task_id, "reason": reason},
        }
    )
    try:
        store.send(
            team, member_queue(str(task.assignee)), message.model_dump(mode="json", by_alias=True)
        )
    except TenureError:
        pass  # the worker also sees the cancelled state on its next heartbeat
