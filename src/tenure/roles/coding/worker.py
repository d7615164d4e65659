"""The worker's side of a coding team: one attempt of an agent CLI in a worktree of its own.

``WorktreeAgent`` is an ordinary executor: a follower runs it through the attempt
runner like any other, under the attempt's idempotency key. It creates the
attempt's worktree and branch ``tenure/RUN/TASK/N`` at the integration commit the
leader dispatched from (``input.base``), runs the agent there with its task file,
a port block and a database name of its own, and commits whatever the agent left,
also after a failure or a kill, so no attempt's work is lost. Its result carries
the agent's report; what the change is worth is decided by the leader's checks,
never by the report.

An agent ``with_mcp`` reports over MCP instead of in its result file: while it runs,
the attempt's tools (bound to its task) are served here, outside its sandbox, on
loopback with a token of the attempt's own (``roles.member.mcp.http``). What it
submits there becomes the attempt's result (its report, notes and evidence; the
status it chose), with the branch and base as always; an agent that submits nothing
falls back to its result file. Either way the leader's checks decide.
"""

from __future__ import annotations

import contextlib
import json
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenure.executors import TaskContext, failed, fit_result, make_result
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.agent_presets import MCP_TOKEN_VAR
from tenure.executors.containment import Guard, UnsafeFile, read_beneath
from tenure.executors.process_group import RUN_MARK
from tenure.executors.worktrees import TENURE_DIR, Worktrees
from tenure.protocol import TaskEnvelope, TaskResult, TenureError, to_dict
from tenure.roles.member.mcp.http import AttemptLink, attempt_tools
from tenure.store import Store

REPORT_LIMIT = 64 * 1024  # characters of the agent's report that travel in the result
LOG_TAIL = 2000


def attempts_dir(root: Path, run: str) -> Path:
    """Where a run's per-attempt logs, agent homes and pid files live (never committed)."""
    return root / TENURE_DIR / "attempts" / run


def result_file(worktree: Path, task_id: str) -> Path:
    return worktree / TENURE_DIR / f"result-{task_id}.md"


@dataclass
class WorktreeAgent:
    """Runs one coding attempt; ``slot`` picks the port block (one per worker)."""

    root: Path
    run: str
    agent: AgentCLI
    slot: int
    port_first: int = 20000
    guard: Guard | None = None  # undoes what the agent may not change, before any commit
    store: Store | None = None  # the run's store: an agent with_mcp reads its task there

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        base = str(envelope.input.get("base", ""))
        task_file = str(envelope.input.get("task_file", ""))
        if not base or not task_file:
            return failed(envelope, "the envelope names no base commit or task file")
        trees = Worktrees(self.root, self.run, port_first=self.port_first)
        try:
            tree = trees.create(envelope.task_id, envelope.attempt, base, self.slot)
        except TenureError as exc:
            return failed(envelope, f"cannot create the attempt's worktree: {exc}")
        report_path = result_file(tree.path, envelope.task_id)
        with contextlib.ExitStack() as serving:
            try:
                link = serving.enter_context(self._tools(envelope, ctx))
            except TenureError as exc:
                return failed(envelope, f"cannot serve the attempt's MCP tools: {exc}")
            mcp_env = {MCP_TOKEN_VAR: link.token} if link is not None else {}
            run = self.agent.run(
                worktree=tree.path,
                task_file=tree.path / task_file,
                result_file=report_path,
                attempt_dir=attempts_dir(self.root, self.run)
                / f"{envelope.task_id}-{envelope.attempt}",
                deadline_seconds=envelope.deadline_seconds,
                extra_env={
                    **tree.env(),
                    "TENURE_TASK_ID": envelope.task_id,
                    "TENURE_TEAM": ctx.team,
                    RUN_MARK: ctx.run_mark,
                    "TENURE_IDEMPOTENCY_KEY": envelope.idempotency_key,
                    "TENURE_EPOCH": str(envelope.epoch),
                    "TENURE_ATTEMPT": str(envelope.attempt),
                    "TENURE_RUN": self.run,
                    **mcp_env,
                },
                commit_message=f"tenure: {envelope.task_id} attempt {envelope.attempt} ({self.agent.name})",
                cancel=ctx.cancelled,
                dirs=tree.dirs,
                branch=tree.branch,
                protect=[self.root, tree.dirs.common_dir],
                before_commit=self.guard.after_agent if self.guard is not None else None,
                on_start=ctx.child_started,
                mcp_url=link.url if link is not None else None,
            )
            word = link.word() if link is not None else None
        report, refused = self._read(report_path, REPORT_LIMIT)
        if word is not None:
            report = report_of(word)[:REPORT_LIMIT]
        reported = "mcp" if word is not None else ("file" if report else "none")
        artifact: dict[str, Any] = {
            "branch": tree.branch,
            "base": tree.base,
            "report": report,
            "agent": {
                "exit_code": run.exit_code,
                "seconds": round(run.seconds, 3),
                "log": str(run.log),
                "committed": run.committed,
                "sandboxed": run.sandboxed,
                "reported": reported,
            },
        }
        reason = run.reason or refused
        if reason:
            tail = self._read(run.log, 1 << 20)[0][-LOG_TAIL:]
            result = failed(envelope, reason, output=tail or reason)
            return result.model_copy(update={"artifact": artifact})
        if word is None:
            return make_result(envelope, "completed", artifact=artifact)
        return fit_result(_with_word(envelope, word, artifact))

    def _tools(
        self, envelope: TaskEnvelope, ctx: TaskContext
    ) -> contextlib.AbstractContextManager[AttemptLink | None]:
        """The attempt's MCP tools while the agent runs, for an agent with_mcp."""
        if not self.agent.mcp:
            return nullcontext(None)
        if self.store is None:
            raise TenureError("the worker has no store to serve its agent's task from")
        return attempt_tools(self.store, ctx.team, ctx.worker_id, envelope, ctx)

    def _read(self, path: Path, limit: int) -> tuple[str, str]:
        """A file an agent could have replaced, read without following links: its text,
        and why it was refused ("" when it was read, or is missing)."""
        try:
            return read_beneath(self.root, path.relative_to(self.root), limit), ""
        except UnsafeFile as exc:
            return "", f"refused the report file: {exc}"
        except (OSError, ValueError):
            return "", ""


def _with_word(envelope: TaskEnvelope, word: TaskResult, artifact: dict[str, Any]) -> TaskResult:
    """The attempt's result from what its agent submitted over MCP: its status, notes,
    evidence, question and confidence; the artifact the worker's (branch, base, report)."""
    fields: dict[str, Any] = {"artifact": artifact, "notes": to_dict(word.notes)}
    if word.evidence:
        fields["evidence"] = [to_dict(e) for e in word.evidence]
    if word.question:
        fields["question"] = word.question
    if word.confidence is not None:
        fields["confidence"] = word.confidence
    return make_result(envelope, word.status, **fields)


def report_of(word: TaskResult) -> str:
    """What an agent submitted over MCP, as the report a result file would hold."""
    notes = word.notes
    lines = [f"(reported over MCP: submit_result, status {word.status})", ""]
    sections = [
        ("Changed", notes.changed),
        ("Verification", notes.verified),
        ("Open questions", [*notes.uncertain, *([word.question] if word.question else [])]),
    ]
    for title, items in sections:
        lines += [f"## {title}", *(f"- {item}" for item in items or ["(none)"]), ""]
    if word.evidence:
        lines.append("## Evidence")
        lines += [f"- {json.dumps(to_dict(e), ensure_ascii=False)}" for e in word.evidence]
        lines.append("")
    if word.artifact is not None:
        shown = json.dumps(word.artifact, indent=2, ensure_ascii=False)
        lines += ["## Artifact", "```json", shown, "```", ""]
    return "\n".join(lines)
