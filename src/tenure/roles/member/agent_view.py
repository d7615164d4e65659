"""What an agent served over MCP reads of its task: the envelope's fields, where the
task stands in the vocabulary of MCP Tasks, and what to do next."""

from __future__ import annotations

from typing import Any

from tenure.protocol import TaskEnvelope, to_dict
from tenure.roles.register import WAITING_STATES, Task
from tenure.store import TERMINAL_STATES

__all__ = ["agent_status", "envelope_view", "next_step"]


def agent_status(state: str) -> str:
    """A register state in the vocabulary of MCP Tasks: ``working``, ``input_required``,
    ``completed``, ``failed``, ``cancelled`` (docs/mcp.md has the table)."""
    if state == "done":
        return "completed"
    if state in ("failed", "cancelled"):
        return state
    if state in WAITING_STATES:
        return "input_required"
    return "working"


def envelope_view(env: TaskEnvelope) -> dict[str, Any]:
    """The envelope as the agent reads it: criteria, checks, input, scope, history."""
    return {
        "goal": env.goal,
        "acceptance_criteria": list(env.acceptance_criteria),
        "checks": [to_dict(c) for c in env.checks],
        "input": env.input,
        "scope": list(env.scope),
        "depends_on": list(env.depends_on),
        "history": [to_dict(h) for h in env.history],
        "output_schema": env.output_schema,
        "deadline_seconds": env.deadline_seconds,
    }


def next_step(task: Task, in_hand: bool) -> str:
    """The one thing the agent should do now, said with every read."""
    if in_hand:
        return "work on it; report_progress restating the criteria; submit_result or ask_question"
    if task.state in WAITING_STATES:
        return "the task waits for the operator: call wait_for_answer"
    if task.state in TERMINAL_STATES:
        return f"nothing: the task is {task.state}"
    if task.state == "review":
        return "the leader is verifying the result: call read_task again"
    return "the next attempt is on its way: call read_task again"
