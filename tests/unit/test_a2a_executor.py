"""``--exec a2a:URL``: a remote A2A agent, built with the SDK and served on loopback,
as a team's worker. Its result goes through the ladder like any worker's; a remote
that fails or sends garbage fails the attempt with a readable reason; a remote that
overruns the deadline is sent a cancel."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

from a2a.helpers.proto_helpers import get_message_text, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Task, TaskState, TaskStatus
from starlette.applications import Starlette

import tenure
from tenure.executors import resolve_executor
from tenure.executors.a2a import A2AExecutor
from tenure.protocol import ProtocolError
from tenure.protocol.limits import MAX_RESULT_BYTES
from tenure.roles.teams.a2a import A2AServer, agent_card, bound_socket


class Remote(AgentExecutor):
    """A tiny A2A agent whose behaviour the goal (the first text line) chooses."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.messages: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        import asyncio

        text = get_message_text(context.message) if context.message else ""
        self.messages.append(text)
        goal = text.splitlines()[0] if text else ""
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        if context.current_task is None:
            status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            await event_queue.enqueue_event(
                Task(id=str(context.task_id), context_id=str(context.context_id), status=status)
            )
        await updater.start_work()
        if goal == "hang":
            await asyncio.sleep(30)
        elif goal == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("no quota left")]))
        elif goal == "ask":
            question = updater.new_agent_message([new_text_part("Which region?")])
            await updater.requires_input(question)
        elif goal == "huge":
            await updater.add_artifact([new_text_part("x" * (MAX_RESULT_BYTES + 10))])
            await updater.complete()
        elif goal == "wrong":
            await updater.add_artifact([new_data_part({"total": "not a number"})])
            await updater.complete()
        else:
            await updater.add_artifact([new_data_part({"total": 42, "goal": goal})])
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.append(str(context.task_id))
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


@contextmanager
def remote_agent() -> Iterator[tuple[str, Remote]]:
    remote = Remote()

    def make_app(url: str) -> Starlette:
        card = agent_card("remote", url)
        handler = DefaultRequestHandler(remote, InMemoryTaskStore(), card)
        return Starlette(
            routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
        )

    server = A2AServer(bound_socket("127.0.0.1", 0), make_app)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield server.url, remote
    finally:
        server.stop()
        thread.join(timeout=5)


SCHEMA = {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}


def run(url: str, goal: str, **task: Any) -> tenure.TaskOutcome:
    plan = tenure.Plan.model_validate(
        {
            "team": "callers",
            "max_attempts": task.pop("max_attempts", 1),
            "tasks": [{"id": "t", "goal": goal, **task}],
        }
    )
    store = tenure.open_store("memory://")
    result = tenure.Team(plan, executor=f"a2a:{url}", store=store, workers=1, ttl=1.0).run(
        timeout=15
    )
    return result.tasks["t"]


def test_a_remote_agents_artifact_passes_the_ladder() -> None:
    with remote_agent() as (url, remote):
        outcome = run(
            url,
            "sum the invoices",
            acceptance_criteria=["a total"],
            checks=[{"kind": "schema", "schema": SCHEMA}],
        )
    assert outcome.state == "done"
    assert outcome.artifact == {"total": 42, "goal": "sum the invoices"}
    assert "a total" in remote.messages[0]  # the criteria travel with the goal


def test_a_wrong_artifact_is_refused_by_the_schema_check_and_retried() -> None:
    with remote_agent() as (url, remote):
        outcome = run(url, "wrong", max_attempts=2, checks=[{"kind": "schema", "schema": SCHEMA}])
    assert outcome.state in ("failed", "blocked")
    assert outcome.attempts == 2 and len(remote.messages) == 2


def test_a_failing_remote_fails_the_attempt_with_its_reason() -> None:
    with remote_agent() as (url, _):
        outcome = run(url, "fail")
    assert outcome.state in ("failed", "blocked")
    assert "ended task" in outcome.reason and "failed: no quota left" in outcome.reason


def test_an_oversized_remote_result_fails_by_size_not_by_crash() -> None:
    with remote_agent() as (url, _):
        outcome = run(url, "huge")
    assert outcome.state in ("failed", "blocked")
    assert "the limit is" in outcome.reason


def test_input_required_puts_the_task_in_the_inbox_with_the_agents_question() -> None:
    with remote_agent() as (url, _):
        outcome = run(url, "ask")
    assert outcome.state == "blocked"
    assert outcome.question == "Which region?"


def test_the_deadline_sends_a_cancel_to_the_remote() -> None:
    with remote_agent() as (url, remote):
        outcome = run(url, "hang", deadline_seconds=1.0)
        assert remote.cancelled, "no cancel reached the remote agent"
    assert outcome.state in ("failed", "blocked")
    assert "a cancel was sent" in outcome.reason


def test_an_unreachable_agent_fails_with_a_readable_line() -> None:
    sock = bound_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    sock.close()
    outcome = run(url, "anything")
    assert outcome.state in ("failed", "blocked")
    assert "has no usable card" in outcome.reason


def test_the_spec_is_resolved_and_a_bad_url_refused() -> None:
    assert isinstance(resolve_executor("a2a:http://127.0.0.1:9/"), A2AExecutor)
    with pytest.raises(ProtocolError, match="http"):
        resolve_executor("a2a:ftp://example")


def test_a_server_that_speaks_no_a2a_fails_the_attempt_in_words() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Garbage(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            body = b'{"name": 7, "skills": "nope"'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        outcome = run(f"http://127.0.0.1:{server.server_address[1]}/", "anything", max_attempts=2)
    finally:
        server.shutdown()
        server.server_close()
    assert outcome.state in ("failed", "blocked") and outcome.attempts == 2
    assert "has no usable card" in outcome.reason
