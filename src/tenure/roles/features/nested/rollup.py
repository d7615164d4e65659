"""The one result a sub-leader reports upward for its whole nested team.

It is a pure function of the child register, so any sub-leader (the one the
parent chose, or a stand-in elected inside the child team) builds the same
report, and building it twice is harmless.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tenure.executors import make_result
from tenure.protocol import TaskEnvelope, TaskResult
from tenure.protocol.envelope import Spend
from tenure.protocol.taskspec import SpendEntry
from tenure.protocol.words import counted
from tenure.roles.leader.replan import dropped_by_replan
from tenure.roles.register import Task

INBOX_STATES = ("blocked", "failed")  # waiting for a person (`tenure inbox`)
QUESTION_LIMIT = 300


def nested_spend(
    tasks: list[Task],
    reported: list[SpendEntry],
    planning: dict[str, float] | None = None,
) -> Spend | None:
    """The nested team's model spend (its tasks', plus ``planning``: what the
    sub-leader's planner spent) not yet reported upward by an earlier attempt."""
    keys = ("input_tokens", "output_tokens", "cost_usd", "calls", "unpriced")
    total = dict.fromkeys(keys, 0.0)
    for entry in (e for task in tasks for e in task.data.spend_log):
        for key in keys:
            total[key] += float(getattr(entry, key))
    for key in keys:
        total[key] += float((planning or {}).get(key, 0))
    for entry in reported:
        for key in keys:
            total[key] -= float(getattr(entry, key))
    if not any(total[key] > 0 for key in keys):
        return None
    return Spend(
        input_tokens=max(0, int(total["input_tokens"])),
        output_tokens=max(0, int(total["output_tokens"])),
        cost_usd=max(0.0, total["cost_usd"]),
        calls=max(0, int(total["calls"])),
        unpriced=max(0, int(total["unpriced"])),
    )


def rollup(
    env: TaskEnvelope,
    team: str,
    tasks: list[Task],
    usage: Spend | None = None,
    team_epoch: int = 0,
) -> TaskResult:
    """One result for the composite task: the children's states, artifacts and evidence.

    ``team_epoch`` is the child epoch the report was made under; the parent refuses
    it once the child team has moved past it. Children waiting for a person make
    the result ``blocked`` with a question that says how to answer them.
    """
    children: dict[str, Any] = {}
    evidence: list[Any] = []
    for task in sorted(tasks, key=lambda t: t.task_id):
        result = task.result or {}
        children[task.task_id] = {
            "state": task.state,
            "attempt": task.attempt,
            "assignee": task.assignee,
            "artifact": None if task.tamper else result.get("artifact"),
        }
        if task.is_done:
            evidence.extend(result.get("evidence", []))
    states = Counter(t.state for t in tasks)
    artifact = {
        "team": team,
        "team_epoch": team_epoch,
        "states": dict(sorted(states.items())),
        "tasks": children,
    }
    fields: dict[str, Any] = {"artifact": artifact, "evidence": evidence, "usage": usage}
    waiting = sorted(t.task_id for t in tasks if t.state in INBOX_STATES)
    if waiting:
        question = waiting_question(team, [t for t in tasks if t.task_id in waiting])
        return make_result(env, "blocked", question=question, **fields)
    # a task a replan of the nested team left out is no longer its work
    unfinished = sorted(
        t.task_id for t in tasks if not t.is_done and not dropped_by_replan(t)
    )
    if unfinished:
        reason = f"nested team {team}: not done: {', '.join(unfinished)}"
        return make_result(env, "failed", notes={"uncertain": [reason]}, **fields)
    return make_result(env, "completed", **fields)


def waiting_question(team: str, waiting: list[Task]) -> str:
    """The question that puts the composite task in the parent's inbox: which
    child tasks wait, why, and the exact command that answers each."""
    lines = [f"nested team {team} has {counted(len(waiting), 'task')} waiting for you:"]
    for task in sorted(waiting, key=lambda t: t.task_id):
        why = str(task.data.question or task.reason or task.state)[:QUESTION_LIMIT]
        lines.append(f"- {task.task_id} ({task.state}): {why}")
        lines.append(f'  answer: tenure answer --team {team} {task.task_id} "..."')
    lines.append("this task is re-queued by itself once the last of them is answered")
    return "\n".join(lines)
