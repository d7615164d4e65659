"""The run folder follows the register: what changed since the last commit is written
into the task, results and inbox files and committed, one commit per task.

Every round the leader compares each task of the register with what the files
already hold (``CodingNotes`` in the task's data counts the failures and answers
written; ``RunPlace.rows`` is status.yml as last committed) and writes the
difference: a failed attempt's output in ``tasks/TASK.md`` (above the Q&A) and its
report in ``results/TASK.md``; the operator's answers in the Q&A; a task that now
needs the operator in ``inbox.md``; a cancel; a split in ``plan.md``. The counters
are written to the register (fenced) before the files, so a change is never
written twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tenure.protocol import TaskResult
from tenure.protocol.clip import first_line
from tenure.protocol.envelope import PriorAttempt
from tenure.protocol.errors import Conflict
from tenure.protocol.taskspec import Answer, AttemptData
from tenure.roles.coding.files import CANCELLED, NEEDS_OPERATOR, SPLIT
from tenure.roles.coding.rows import CodingNotes, row_of
from tenure.roles.coding.run import RunPlace
from tenure.roles.register import Task
from tenure.store import TERMINAL_STATES

__all__ = ["project", "report_lines", "write_report"]


@dataclass
class _Change:
    """What one task's files get this round, and how the commit and the log say it."""

    subject: list[str] = field(default_factory=list)
    events: list[tuple[str, dict[str, object]]] = field(default_factory=list)


def project(place: RunPlace, tasks: list[Task]) -> bool:
    """Write and commit every change the register has that the files do not; True if any."""
    by_id = {t.task_id: t for t in tasks}
    acted = False
    for task in tasks:
        if task.spec.replica_of:
            continue
        if _project_one(place, task, by_id):
            acted = True
    return acted


def _project_one(place: RunPlace, task: Task, by_id: dict[str, Task]) -> bool:
    notes = CodingNotes.of(task.data)
    row = row_of(place.run_id, task, by_id)
    before = place.rows.get(task.task_id)
    final = task.state in TERMINAL_STATES  # its data can no longer change: nothing new in it
    fresh_failures = [] if final else task.data.history[notes.noted :]
    fresh_answers = [] if final else task.data.qa[task.data.qa_seen :]
    newly = before is None or before.state != row.state
    needs = row.state == NEEDS_OPERATOR and newly
    cancelled = row.state == CANCELLED and newly
    split = row.state == SPLIT and newly and (before is None or before.state != SPLIT)
    if not (fresh_failures or fresh_answers or needs or cancelled or split):
        return False
    if fresh_failures or fresh_answers:  # counted first: a change is never written twice
        counted = notes.model_copy(update={"noted": len(task.data.history)})
        data = counted.into(task.data).with_(qa_seen=len(task.data.qa))
        try:
            task = place.register.move(task, task.state, data=data)
        except Conflict:
            return False  # changed meanwhile (an answer, a cancel): the next round sees it
    change = _Change()
    for prior in fresh_failures:
        _failure(place, task, prior, notes, change)
    if fresh_answers:
        _answers(place, task, fresh_answers, change)
    if needs:
        place.folder.append_inbox(task.task_id, f"{row.reason} (branches kept for autopsy)")
        change.subject.append(f"{task.task_id} needs the operator")
    if cancelled:
        change.subject.append(f"{task.task_id} cancelled")
        change.events.append(("cancelled", {"task_id": task.task_id, "reason": row.reason}))
    if split:
        _split(place, task, change)
    place.commit("tenure: " + "; ".join(change.subject))
    for kind, data_ in change.events:
        place.event(kind, **data_)
    return True


def _failure(
    place: RunPlace, task: Task, prior: PriorAttempt, notes: CodingNotes, change: _Change
) -> None:
    spec = task.spec.plan_task()
    place.folder.write_task(spec, place.plan)
    place.folder.append_attempt(task.task_id, prior.attempt, prior.failure)
    result = _result_of(task, prior.attempt)
    if result is not None and prior.attempt > notes.reported:
        write_report(place, task.task_id, prior.attempt, result, [f"rejected: {first_line(prior.failure)}"])
    reason = first_line(prior.failure, 300)
    info = {"task_id": task.task_id, "attempt": prior.attempt, "reason": reason}
    if prior.status == "conflict":
        change.subject.append(f"{task.task_id} conflicts with the integration branch")
        change.events.append(("conflict", info))
    elif prior.status == "interrupted":
        change.subject.append(f"{task.task_id} attempt {prior.attempt} interrupted")
        change.events.append(("interrupted", {"task_id": task.task_id, "attempt": prior.attempt}))
    else:
        change.subject.append(f"{task.task_id} attempt {prior.attempt} rejected")
        now = row_of(place.run_id, task, {task.task_id: task}).state
        change.events.append(("rejected", {**info, "now": now}))


def _answers(place: RunPlace, task: Task, answers: list[Answer], change: _Change) -> None:
    place.folder.write_task(task.spec.plan_task(), place.plan)  # answered before it ran
    for entry in answers:
        place.folder.append_answer(task.task_id, entry.question, entry.answer)
    change.subject.append(f"operator answered {task.task_id}")
    texts = [entry.answer for entry in answers]
    now = row_of(place.run_id, task, {task.task_id: task}).state
    change.events.append(("answered", {"task_id": task.task_id, "answers": texts, "now": now}))


def _split(place: RunPlace, task: Task, change: _Change) -> None:
    ids = list(task.data.split_into)
    last = ids[-1] if ids else ""
    place.folder.replace_plan(
        place.plan,
        f"split {task.task_id} into {', '.join(ids)}",
        [f"{last} depends on the other parts and runs {task.task_id}'s own checks"],
    )
    change.subject.append(f"split {task.task_id} into {', '.join(ids)}")


def _result_of(task: Task, attempt: int) -> TaskResult | None:
    if not task.result:
        return None
    try:
        result = TaskResult.model_validate(task.result)
    except ValueError:
        return None
    return result if result.idempotency_key.endswith(f":attempt-{attempt}") else None


def report_lines(result: TaskResult) -> list[str]:
    """The agent's line of a results entry: how it exited, how long, its log."""
    artifact = result.artifact if isinstance(result.artifact, dict) else {}
    agent = artifact.get("agent") if isinstance(artifact.get("agent"), dict) else {}
    assert isinstance(agent, dict)
    return [
        f"agent: exit {agent.get('exit_code')}, {float(agent.get('seconds') or 0):.1f}s, "
        f"log {agent.get('log', '?')}"
    ]


def write_report(
    place: RunPlace, task_id: str, attempt: int, result: TaskResult, verdicts: list[str]
) -> None:
    """Append the attempt's report and the leader's verdicts to results/TASK.md."""
    artifact = result.artifact if isinstance(result.artifact, dict) else {}
    report = str(artifact.get("report") or "")
    lines = [f"- {line}" for line in [*report_lines(result), *verdicts]]
    place.folder.append_result(task_id, attempt, report, "\n".join(lines))


def noted(data: AttemptData, **changes: object) -> AttemptData:
    """``data`` with its ``CodingNotes`` changed."""
    notes = CodingNotes.of(data).model_copy(update=changes)
    return notes.into(data)
