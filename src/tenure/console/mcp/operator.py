"""The operator role's tools: what a person's agent may read and decide.

The same rules as ``tenure status``, ``tenure inbox``, ``tenure answer`` and
``tenure cancel`` (``tenure.roles.teams``); what members wrote is returned with the
known secrets taken out, as every other way of showing it does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenure.console.keys_cmds import keys_root
from tenure.protocol.errors import ConfigError
from tenure.protocol.limits import check_text
from tenure.protocol.secrets import redact_value
from tenure.roles.member.mcp.sdk import server_class
from tenure.roles.member.mcp.tools import answering
from tenure.roles.register import Task
from tenure.roles.teams import inbox as runtime
from tenure.roles.teams.reading import tasks as read_tasks
from tenure.store import Store

INSTRUCTIONS = (
    "You act for the operator of Tenure teams: read where tasks stand (status), what "
    "waits for a person (inbox), and answer a blocked task or cancel one."
)


def operator_server(
    store: Store,
    *,
    team: str | None = None,
    name: str = "tenure-operator",
    keys: Path | None = None,
) -> Any:
    """An MCP server (not started) of the operator's tools on ``store``, writing with the
    lead keys in ``keys`` (default: the key directory); with ``team``,
    on that team (and its nested teams) only."""
    server = server_class()(name, instructions=INSTRUCTIONS, log_level="WARNING")
    scope = team

    def chosen(asked: str | None) -> str:
        wanted = asked or team
        if wanted is None:
            raise ConfigError("team: name the team (teams: " + ", ".join(store.teams()[:10]) + ")")
        if team is not None and not (wanted == team or wanted.startswith(f"{team}/")):
            raise ConfigError(f"team: this server serves team {team!r} only; got {wanted[:80]!r}")
        if wanted not in store.teams():
            raise ConfigError(f"team: no team {wanted[:80]!r} in this store")
        return wanted

    def status(team: str | None = None) -> dict[str, Any]:
        """Every task of the team: state, attempt, assignee and why it is where it is."""

        def body() -> dict[str, Any]:
            name = chosen(team)
            return _clean({"team": name, "tasks": [_row(t) for t in read_tasks(store, name)]})

        return answering(body)

    def inbox(team: str | None = None) -> dict[str, Any]:
        """The tasks waiting for a person: questions, refusals, exhausted retries."""

        def body() -> dict[str, Any]:
            teams = [chosen(asked)] if (asked := team or scope) else None
            items = runtime.inbox(store, teams)
            rows = [
                {
                    "team": i.team,
                    "task_id": i.task.task_id,
                    "why": i.why,
                    "attempt": i.task.attempt,
                    "waiting_seconds": round(i.waiting_seconds, 1),
                }
                for i in items
            ]
            return _clean({"items": rows})

        return answering(body)

    def answer(task_id: str, text: str, team: str | None = None) -> dict[str, Any]:
        """Answer a blocked task: the answer joins its Q&A and the task is re-queued."""

        def body() -> dict[str, Any]:
            check_text(text, "text")
            answered = runtime.answer(store, chosen(team), task_id, text, keys=keys_root(keys))
            return {
                "answered": task_id,
                "state": answered.task.state,
                "requeued": [f"{t} {i}" for t, i in answered.requeued],
            }

        return answering(body)

    def cancel(
        task_id: str, reason: str = "cancelled by operator", team: str | None = None
    ) -> dict[str, Any]:
        """Cancel a task; a worker running it is told to stop."""

        def body() -> dict[str, Any]:
            check_text(reason, "reason")
            moved = runtime.cancel(store, chosen(team), task_id, reason, keys=keys_root(keys))
            return {"cancelled": task_id, "state": moved.state}

        return answering(body)

    for tool in (status, inbox, answer, cancel):
        server.add_tool(tool)
    return server


def _row(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "state": task.state,
        "attempt": task.attempt,
        "assignee": task.record.assignee,
        "reason": task.reason,
        "question": task.data.question,
    }


def _clean(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with the known secrets taken out (what members wrote may hold one)."""
    return dict(redact_value(value))
