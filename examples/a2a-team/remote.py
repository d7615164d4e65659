"""A tiny A2A agent built with the SDK alone: it answers each task with a data part
``{"total": N}``, N the number of words it was sent. Tenure uses it as a worker
through ``--exec a2a:URL``."""

from __future__ import annotations

import socket

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_data_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT
from starlette.applications import Starlette


class WordCounter(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, status=status))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        goal = get_message_text(context.message).splitlines()[0] if context.message else ""
        await updater.add_artifact([new_data_part({"total": len(goal.split())})])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def card(url: str) -> AgentCard:
    skill = AgentSkill(id="count", name="Count words", description="Counts words", tags=["demo"])
    return AgentCard(
        name="word counter",
        description="Counts the words of the first line it is sent.",
        version="1",
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json"],
        skills=[skill],
    )


def server(sock: socket.socket) -> uvicorn.Server:
    """A uvicorn server for the agent on ``sock`` (already bound, on loopback)."""
    host, port = sock.getsockname()[:2]
    url = f"http://{host}:{port}/"
    handler = DefaultRequestHandler(WordCounter(), InMemoryTaskStore(), card(url))
    app = Starlette(
        routes=[*create_agent_card_routes(card(url)), *create_jsonrpc_routes(handler, "/")]
    )
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
