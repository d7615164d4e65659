"""Following one task through the store's event log, as the A2A caller sees it: each
change of its A2A state once, in the order the register moved, until it ends or
waits for the caller. Every move is read from the events, so a task that passes
through ``running`` between two polls is still reported ``working``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tenure.protocol.errors import NotFound
from tenure.roles.register import read_task
from tenure.roles.teams.a2a.states import ENDING, Standing, standing_of, state_after
from tenure.store import Store

POLL_SECONDS = 0.05
PAGE = 500


def standing_now(store: Store, team: str, task_id: str) -> Standing | None:
    """Where the task stands now; None when the team has no such task."""
    try:
        return standing_of(read_task(store.get_task(team, task_id)))
    except NotFound:
        return None


async def follow(
    store: Store, team: str, task_id: str, after: int, *, poll: float = POLL_SECONDS
) -> AsyncIterator[Standing]:
    """Each new standing of the task from its register moves after event ``after``
    (read before the task was made or answered, so no move is missed); ends after one
    in ``ENDING``. The store is read in a thread: its calls block."""
    seen = Standing("")
    while seen.state not in ENDING:
        moves, after = await asyncio.to_thread(_moves, store, team, task_id, after)
        for state in moves:
            if state == seen.state:
                continue
            if state in ENDING:  # its question, reason or artifact: from the register
                ended = await asyncio.to_thread(standing_now, store, team, task_id)
                seen = ended if ended is not None and ended.state == state else Standing(state)
            else:
                seen = Standing(state)
            yield seen
            if seen.state in ENDING:
                return
        if not moves:
            await asyncio.sleep(poll)


def _moves(store: Store, team: str, task_id: str, after: int) -> tuple[list[str], int]:
    """The A2A states the task's register moves after ``after`` lead to, in order,
    and the seq read up to."""
    moves: list[str] = []
    while True:
        events = store.events(team, after=after, limit=PAGE)
        for event in events:
            if event.data.get("task_id") != task_id:
                continue
            if event.kind == "task.transition":
                attempt = int(event.data.get("attempt") or 0)
                moves.append(state_after(str(event.data["to"]), event.data.get("from"), attempt))
            elif event.kind == "task.created":
                moves.append(state_after(str(event.data.get("state", "queued")), None, 0))
        if events:
            after = events[-1].seq
        if len(events) < PAGE:
            return moves, after
