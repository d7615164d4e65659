"""A remote A2A agent as a worker (``--exec a2a:URL``).

Each attempt sends the envelope's goal and criteria to the agent at URL as one A2A
message, follows the task the agent makes to a terminal state within the attempt's
deadline, and turns what it ended with into a Tenure result: completed → its
artifacts (data parts as JSON, text parts as strings), input-required → blocked with
the agent's question, failed, rejected or canceled → failed with the agent's words.
The agent is as untrusted as any executor: nothing it sends names an executor or a
check, its result is cut to the limits of ``protocol.limits`` and then goes through
the same verification ladder as every worker's. When the deadline passes or the
attempt is cancelled, the remote task is cancelled too.

Sending is an effect under the attempt's key: a redelivered attempt follows the task
it already started instead of starting another. An answered question starts the next
attempt as a new remote task whose message carries the questions and answers so far.

An agent whose card requires an HTTP bearer scheme (a Tenure team served with a token)
is sent ``token`` (``TENURE_A2A_REMOTE_TOKEN`` for ``a2a:URL``), and only such an agent:
the SDK's client adds it for the scheme the card names.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tenure.executors.a2a_sdk import require_a2a
from tenure.executors.base import TaskContext, failed, make_result, safe_result
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import Task

__all__ = ["ENV_REMOTE_TOKEN", "A2AExecutor", "artifact_of", "message_text"]

ENV_REMOTE_TOKEN = "TENURE_A2A_REMOTE_TOKEN"
"""The bearer token ``a2a:URL`` workers present to an agent whose card asks for one."""

POLL_SECONDS = 0.1
QUESTION_LIMIT = 4 * 1024
"""The most of an agent's question or failure reason a result carries."""


class A2AExecutor:
    """Does each attempt by asking the A2A agent at ``url``."""

    def __init__(self, url: str, *, poll: float = POLL_SECONDS, token: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ProtocolError("executor", f"a2a:URL with an http(s) URL, got {url!r}")
        require_a2a()
        self.url = url
        self.poll = poll
        self.token = token

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        return safe_result(envelope, lambda: asyncio.run(self._attempt(envelope, ctx)))

    async def _attempt(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        import httpx
        from a2a.client import A2AClientError, ClientConfig, create_client

        deadline = time.monotonic() + envelope.deadline_seconds * 0.95
        async with httpx.AsyncClient(timeout=min(30.0, envelope.deadline_seconds)) as http:
            try:
                client = await create_client(
                    self.url,
                    ClientConfig(streaming=False, polling=True, httpx_client=http),
                    interceptors=_bearer(self.token),
                )
            except (A2AClientError, httpx.HTTPError, ValueError) as exc:
                return failed(envelope, f"the A2A agent at {self.url} has no usable card: {exc}")
            try:
                return await self._follow(client, envelope, ctx, deadline)
            except (A2AClientError, httpx.HTTPError) as exc:
                return failed(envelope, f"the A2A agent at {self.url} failed: {exc}")

    async def _follow(
        self, client: Client, envelope: TaskEnvelope, ctx: TaskContext, deadline: float
    ) -> TaskResult:
        loop = asyncio.get_running_loop()

        def started() -> str:  # in a thread: the effect's store calls must not block the loop
            return asyncio.run_coroutine_threadsafe(_send(client, envelope), loop).result()

        task_id = await asyncio.to_thread(ctx.effect, f"a2a-send:{envelope.attempt}", started)
        if not isinstance(task_id, str) or not task_id:
            return failed(envelope, f"the A2A agent at {self.url} answered with no task")
        while True:
            task = await _get(client, task_id)
            result = _ended(envelope, task, self.url)
            if result is not None:
                return result
            if ctx.cancelled.is_set() or time.monotonic() > deadline:
                await _cancel(client, task_id)
                why = "the attempt was cancelled" if ctx.cancelled.is_set() else "its deadline"
                return failed(
                    envelope,
                    f"the A2A agent at {self.url} did not finish task {task_id} before {why} "
                    f"({envelope.deadline_seconds:g}s); a cancel was sent to it",
                )
            await asyncio.sleep(self.poll)


def _bearer(token: str | None) -> list[Any]:
    """The SDK's interceptor that adds ``token`` for a bearer scheme the card requires."""
    if not token:
        return []
    from a2a.client import ClientCallContext
    from a2a.client.auth import AuthInterceptor, CredentialService

    given: str = token

    class Bearer(CredentialService):
        async def get_credentials(self, name: str, context: ClientCallContext | None) -> str:
            return given

    return [AuthInterceptor(Bearer())]


async def _send(client: Client, envelope: TaskEnvelope) -> str:
    """Send the attempt's message; the id of the task the agent made for it."""
    from a2a.helpers.proto_helpers import new_data_part, new_message, new_text_part
    from a2a.types import Role, SendMessageConfiguration, SendMessageRequest

    parts = [
        new_text_part(_request_text(envelope)),
        new_data_part({"goal": envelope.goal, "acceptance_criteria": envelope.acceptance_criteria}),
    ]
    message = new_message(parts=parts, role=Role.ROLE_USER)
    message.message_id = uuid.uuid4().hex
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )
    async for event in client.send_message(request):
        if event.HasField("task"):
            return str(event.task.id)
        if event.HasField("status_update"):
            return str(event.status_update.task_id)
        if event.HasField("message"):
            return str(event.message.task_id)
    return ""


def _request_text(envelope: TaskEnvelope) -> str:
    lines = [envelope.goal]
    if envelope.acceptance_criteria:
        lines += ["", "Acceptance criteria:", *(f"- {c}" for c in envelope.acceptance_criteria)]
    answers = envelope.input.get("operator_answers")
    if isinstance(answers, list) and answers:
        lines += ["", "Answers to earlier questions:"]
        for each in answers:
            if isinstance(each, dict):
                lines += [f"Q: {each.get('question', '')}", f"A: {each.get('answer', '')}"]
    return "\n".join(lines)


async def _get(client: Client, task_id: str) -> Task:
    from a2a.types import GetTaskRequest

    return await client.get_task(GetTaskRequest(id=task_id))


async def _cancel(client: Client, task_id: str) -> None:
    from a2a.client import A2AClientError
    from a2a.types import CancelTaskRequest

    try:
        await client.cancel_task(CancelTaskRequest(id=task_id))
    except A2AClientError:
        pass  # it may have ended meanwhile: the attempt fails either way


def _ended(envelope: TaskEnvelope, task: Task, url: str) -> TaskResult | None:
    """The attempt's result once the remote task is terminal or waits for input."""
    from a2a.types import TaskState

    state = task.status.state
    said = message_text(task.status.message)[:QUESTION_LIMIT]
    if state == TaskState.TASK_STATE_COMPLETED:
        return make_result(envelope, "completed", artifact=artifact_of(task))
    if state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
        question = said or f"the A2A agent at {url} asks for input (task {task.id})"
        return make_result(envelope, "blocked", question=question)
    if state in (
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_CANCELED,
    ):
        name = TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")
        return failed(envelope, f"the A2A agent at {url} ended task {task.id} {name}: {said}")
    return None


def message_text(message: Any) -> str:
    """The text parts of an A2A message (or status message), joined; '' for none."""
    if message is None:
        return ""
    return "\n".join(part.text for part in message.parts if part.HasField("text")).strip()


def artifact_of(task: Task) -> Any:
    """A remote task's artifacts as one JSON value: each data part as its JSON, each
    text part as a string; one value alone, several as a list, none as None."""
    from a2a.helpers.proto_helpers import get_data_parts

    from tenure.executors.a2a_sdk import whole_numbers

    values: list[Any] = []
    for artifact in task.artifacts:
        for part in artifact.parts:
            if part.HasField("data"):
                values += [whole_numbers(v) for v in get_data_parts([part])]
            elif part.HasField("text"):
                values.append(part.text)
    if not values:
        return None
    return values[0] if len(values) == 1 else values
