"""How a Tenure task's state reads as an A2A task state (A2A 1.0), in one table.

``docs/protocol.md`` ("Mapping to A2A and MCP Tasks") shows the same table; a test
keeps the two equal. A task re-queued for another attempt (a retry, an answered
question) is still being worked on, so only a task that has not started yet is
``submitted``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tenure.roles.register import Task

if TYPE_CHECKING:
    from a2a.types import TaskState

A2A_STATES: dict[str, str] = {
    "queued": "submitted",
    "running": "working",
    "review": "working",
    "blocked": "input-required",
    "done": "completed",
    "failed": "failed",
    "cancelled": "canceled",
}
"""Tenure task state → A2A task state."""

REJECTED = "rejected"
"""A request whose plan was refused: no Tenure task was made for it."""

ENDING = frozenset({"completed", "failed", "canceled", "rejected", "input-required"})
"""Where following a task stops: terminal, or waiting for the caller's next message."""


@dataclass(frozen=True)
class Standing:
    """Where a task stands, as the A2A caller is told it."""

    state: str  # an A2A state: submitted, working, input-required, completed, ...
    text: str = ""  # the question, the failure's reason, or ""
    artifact: Any = None


def standing_of(task: Task) -> Standing:
    """The A2A view of ``task``."""
    state = A2A_STATES[task.state]
    if task.state == "queued" and (task.attempt > 1 or task.data.qa):
        state = "working"  # a retry or an answered question: work goes on
    if state == "input-required":
        return Standing(state, task.data.question or task.reason)
    if state == "completed":
        return Standing(state, "", (task.result or {}).get("artifact"))
    if state in ("failed", "canceled"):
        return Standing(state, task.reason)
    return Standing(state)


def state_after(to: str, came_from: str | None, attempt: int) -> str:
    """The A2A state a register move (an event's ``from``, ``to``, ``attempt``) leads to."""
    if to == "queued" and (attempt > 1 or came_from not in (None, "queued")):
        return "working"
    return A2A_STATES.get(to, "working")


def sdk_state(state: str) -> TaskState:
    """An A2A state name as the SDK's ``TaskState`` value."""
    from a2a.types import TaskState

    return cast("TaskState", TaskState.Value("TASK_STATE_" + state.upper().replace("-", "_")))
