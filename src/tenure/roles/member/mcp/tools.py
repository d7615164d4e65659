"""The worker role's tools: an agent reads its one task, checks in, asks, and submits.

They serve ``tenure mcp``'s worker role (a member of its own, for as long as the
server runs) and a coding attempt's agent (``Bridge(one_attempt=True)``: the tools of
that one attempt, without ``wait_for_answer``). Every tool takes an optional ``task_id``; a value other than the bound task is
refused in one line, so the agent can neither read nor touch another task. The
rules (scope, limits, building the result) are the bridge's; this module only
names the tools and says what each is for, for the agent that reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tenure.protocol import TenureError
from tenure.roles.member.bridge import Bridge
from tenure.roles.member.mcp.sdk import server_class, tool_error

T = TypeVar("T")
ASSIGN_WAIT = 10.0
"""How long ``read_task`` waits for the first assignment by default, seconds."""
ANSWER_WAIT_LIMIT = 300.0
"""The longest a single ``wait_for_answer`` call waits, seconds."""

INSTRUCTIONS = (
    "You are one worker of a Tenure team, bound to one task. Call read_task first: "
    "the acceptance criteria decide whether your work is accepted. Check in with "
    "report_progress (its reply restates the criteria). If you cannot go on without "
    "information, ask_question, then wait_for_answer. Finish with submit_result: "
    "the leader verifies it and read_task shows the verdict (a rejected attempt "
    "comes back with the failure in its history)."
)
ONE_ATTEMPT_INSTRUCTIONS = (
    "You are working one attempt of one task of a Tenure team. Call read_task first: "
    "the acceptance criteria and checks decide whether your work is accepted. Check in "
    "with report_progress (its reply restates the criteria). If you cannot go on "
    "without information, ask_question and stop: the answer comes with the next "
    "attempt. Finish with submit_result: status completed, failed or refused, and notes "
    '{"changed": [...], "verified": [...], "uncertain": [...]} as your report; the '
    "leader then runs the checks itself on what you left in your directory."
)


def answering(call: Callable[[], T]) -> T:
    """Run a tool's body; a Tenure error becomes the tool's one-line error answer."""
    try:
        return call()
    except TenureError as exc:
        raise tool_error()(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def worker_server(bridge: Bridge, *, name: str = "tenure-worker") -> Any:
    """An MCP server (not started) whose tools serve ``bridge``'s task."""
    said = ONE_ATTEMPT_INSTRUCTIONS if bridge.one_attempt else INSTRUCTIONS
    server = server_class()(name, instructions=said, log_level="WARNING")

    def read_task(task_id: str | None = None, wait_seconds: float = ASSIGN_WAIT) -> dict[str, Any]:
        """Your task: goal, acceptance criteria, checks the leader runs, input (with the
        operator's answers), scope (the only things you may change), earlier failed
        attempts, output schema; and where it stands (state, and status as
        working | input_required | completed | failed | cancelled). Waits up to
        wait_seconds for the first assignment."""
        bridge.wait_assigned(min(max(wait_seconds, 0.0), 60.0))
        return answering(lambda: bridge.view(task_id))

    def report_progress(
        message: str,
        criteria: list[str] | None = None,
        fraction_done: float | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Check in with the leader. message: what you did and what is next;
        criteria (optional): every acceptance criterion restated in your own words, in
        order (all of them, or leave it out); fraction_done: 0..1 if you know it. The
        reply restates the task's acceptance criteria and checks: hold your work to
        them."""
        if fraction_done is not None and not 0 <= fraction_done <= 1:
            raise tool_error()(f"fraction_done: a number from 0 to 1; got {fraction_done!r}")
        return answering(lambda: bridge.progress(task_id, message, criteria, fraction_done))

    def ask_question(question: str, task_id: str | None = None) -> dict[str, Any]:
        """Ask the operator what you cannot find out yourself. The task waits (blocked)
        until a person answers; the answer comes with the next attempt, in its input.
        The reply says what to do meanwhile (wait_for_answer, or stop)."""
        return answering(lambda: bridge.ask(task_id, question))

    def wait_for_answer(
        task_id: str | None = None, timeout_seconds: float = 60.0
    ) -> dict[str, Any]:
        """Wait up to timeout_seconds for the operator's answer to your last question."""
        seconds = min(max(timeout_seconds, 0.0), ANSWER_WAIT_LIMIT)
        return answering(lambda: bridge.wait_answer(task_id, seconds))

    def submit_result(
        status: str,
        artifact: Any = None,
        notes: dict[str, list[str]] | None = None,
        evidence: list[dict[str, Any]] | None = None,
        confidence: float | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Your final word on this attempt. status: completed | failed | refused.
        artifact: the work (JSON; matching the output schema if there is one).
        notes: {"changed": [...], "verified": [...], "uncertain": [...]} (failed and
        refused need the reason in uncertain; claim in verified only what you checked).
        evidence: commands you ran {"kind": "command", "command", "exit_code", "output"}
        or sources {"kind": "source", "source", "retrieved_at", "field"}."""
        given = {
            "status": status,
            "artifact": artifact,
            "notes": notes,
            "evidence": evidence,
            "confidence": confidence,
        }
        return answering(lambda: bridge.submit(task_id, given))

    tools: list[Callable[..., dict[str, Any]]] = [read_task, report_progress, ask_question]
    if not bridge.one_attempt:  # one attempt: the answer comes with the next one
        tools.append(wait_for_answer)
    for tool in [*tools, submit_result]:
        server.add_tool(tool)
    return server
