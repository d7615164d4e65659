"""The served team as the SDK's ``AgentExecutor``: an A2A message becomes a task of
the team (or answers the question it waits on), and the task's changes go back to the
caller as A2A status updates, its artifact as a data part."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_message_text,
    new_data_part,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Task, TaskState, TaskStatus

from tenure.coord import Credentials
from tenure.protocol import TenureError
from tenure.roles.member import Mailbox
from tenure.roles.register import Register
from tenure.roles.teams.a2a.follow import follow, standing_now
from tenure.roles.teams.a2a.intake import plan_for, tenure_task_id
from tenure.roles.teams.a2a.led import led, register_for_leader
from tenure.roles.teams.a2a.states import REJECTED, Standing, sdk_state
from tenure.roles.teams.inbox import answer, cancel
from tenure.roles.teams.queue_plan import QUEUE_EPOCH, enqueue_attempt, enqueue_plan
from tenure.store import Store

SENDER = "a2a"


@dataclass
class TeamAgent(AgentExecutor):
    """Runs each A2A task as one task of ``team``: in queue mode the team's queue
    workers (processes, or threads of the server) take it from the shared queue; in a
    team a leader leads, the task is registered for that leader to dispatch."""

    store: Store
    team: str
    credentials: Credentials | None = None  # the team's lead key: signs what it enqueues
    workdir: Path | None = None

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        a2a_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, a2a_id, context_id)
        if context.current_task is None:  # the SDK's record of the task comes first
            await event_queue.enqueue_event(_new_task(a2a_id, context_id, context.message))
        task_id = tenure_task_id(a2a_id)
        message = context.message
        text = get_message_text(message).strip() if message is not None else ""
        data = get_data_parts(list(message.parts)) if message is not None else []
        after = await asyncio.to_thread(self.store.last_event_seq, self.team)
        known = await asyncio.to_thread(standing_now, self.store, self.team, task_id)
        try:
            if known is None:
                await asyncio.to_thread(self._submit, task_id, text, data)
            elif known.state == "input-required":
                await asyncio.to_thread(self._answer, task_id, text or "(no text)")
        except (TenureError, ValueError) as exc:  # a plan refused, or a refused answer
            await updater.update_status(
                sdk_state(REJECTED if known is None else "failed"), _said(updater, str(exc))
            )
            return
        async for standing in follow(self.store, self.team, task_id, after):
            await _report(updater, standing)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        a2a_id = str(context.task_id)
        try:
            await asyncio.to_thread(
                partial(cancel, keys=self._keys()),
                self.store,
                self.team,
                tenure_task_id(a2a_id),
                "cancelled by the A2A caller",
            )
        except TenureError:
            pass  # it ended meanwhile, or never made it into the register
        updater = TaskUpdater(event_queue, a2a_id, str(context.context_id))
        await updater.cancel()

    def _keys(self) -> Path | None:
        """The key directory of the team's lead key: the operator's writes are sealed."""
        return self.credentials.keys.root if self.credentials is not None else None

    def _submit(self, task_id: str, text: str, data: list[Any]) -> None:
        plan = plan_for(self.team, task_id, text, data, workdir=self.workdir)
        if led(self.store, self.team):
            register_for_leader(self.store, plan, credentials=self.credentials)
        else:
            enqueue_plan(self.store, plan, sender=SENDER, credentials=self.credentials)

    def _answer(self, task_id: str, text: str) -> None:
        """The operator's answer; in queue mode its next attempt into the queue too
        (nobody else sends it), where a team's leader dispatches it itself."""
        answered = answer(self.store, self.team, task_id, text, keys=self._keys()).task
        if led(self.store, self.team):
            return
        register = Register(
            self.store, self.team, lambda: QUEUE_EPOCH, self.credentials, queue=True
        )
        mailbox = Mailbox(self.store, self.team, SENDER, credentials=self.credentials)
        enqueue_attempt(register, mailbox, answered)


async def _report(updater: TaskUpdater, standing: Standing) -> None:
    """One standing as the SDK's events: a completed task's artifact first."""
    if standing.state == "completed" and standing.artifact is not None:
        await updater.add_artifact([new_data_part(standing.artifact)], name="result")
    said = _said(updater, standing.text) if standing.text else None
    await updater.update_status(sdk_state(standing.state), said)


def _new_task(a2a_id: str, context_id: str, message: Message | None) -> Task:
    status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
    return Task(
        id=a2a_id, context_id=context_id, status=status, history=[message] if message else []
    )


def _said(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])
