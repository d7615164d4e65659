"""An LLM as a worker: the envelope rendered for a model, a structured result back.

The prompt puts the acceptance criteria FIRST (they decide acceptance), then the
checks the leader will run, the goal, the input, the materials the input names
(files read for the model, with the time they were read), the scope, the
history of earlier failed attempts and the output schema. The model answers one
JSON object: ``status`` (completed | blocked | refused | failed), ``artifact``,
``notes``, ``evidence``, ``question``, ``confidence``.

The answer is validated (JSON, the result schema, the task's output schema, the
result rules). An invalid answer is repaired once, with the validation error
shown to the model; a second invalid answer fails the attempt. ``blocked`` and
``refused`` are returned as they are, for the leader to honour, never retried
here. With ``max_turns > 1`` the model may answer ``continue`` to take another
turn: each is a check-in to the leader, and each restates the criteria.

Every call is recorded (``model.call`` events through the task context) and the
totals travel in ``result.usage``, also when the attempt stops early. The attempt
stops at the envelope's deadline and when ``ctx.cancelled`` is set: between calls,
and during one (each request's timeout is cut to the time left, no retry starts
after it, and a call still running when the member cancels is left behind; its
``model.call`` is logged when it ends). The result then fails with ``stopped: ...``. An envelope's ``budget`` (what the task and
the team have left) is enforced between calls and caps each call's
``max_tokens``: running out stops the attempt with a ``budget exceeded`` reason.

This module holds the executor and its attempt loop; the prompt is in ``llm_prompt``,
the answer's schema and validation in ``llm_answer``, the budget meter in
``llm_budget`` and the materials and scope in ``llm_materials``. Their public names
are re-exported here.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from tenure import observe
from tenure.executors.base import TaskContext, make_result
from tenure.executors.llm_answer import (
    FINAL_STATUSES,
    InvalidAnswer,
    result_schema,
    validate_answer,
)
from tenure.executors.llm_budget import BUDGET_PREFIX, BudgetStop, Meter, estimate_tokens, price_of
from tenure.executors.llm_materials import (
    MATERIAL_LIMIT,
    SKIP_INPUT_KEYS,
    Material,
    check_output_file,
    in_scope,
    read_materials,
)
from tenure.executors.llm_prompt import (
    WORKER_SYSTEM,
    checkin_message,
    render_envelope,
    repair_message,
)
from tenure.models import ChatMessage, Completion, Model, ModelError, traced
from tenure.models.select import open_model
from tenure.models.stop import StopWhen, stopping
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult

__all__ = [
    "BUDGET_PREFIX",
    "FINAL_STATUSES",
    "MATERIAL_LIMIT",
    "SKIP_INPUT_KEYS",
    "WORKER_SYSTEM",
    "BudgetStop",
    "InvalidAnswer",
    "LLMExecutor",
    "STOPPED_PREFIX",
    "Material",
    "Meter",
    "check_output_file",
    "checkin_message",
    "estimate_tokens",
    "in_scope",
    "price_of",
    "read_materials",
    "render_envelope",
    "repair_message",
    "result_schema",
    "validate_answer",
]


STOPPED_PREFIX = "stopped"
LOOK_SECONDS = 0.5
"""The longest a waiting attempt goes without looking at its cancellation (its deadline
it wakes for exactly): a worker holding hundreds of calls in flight wakes for each a
couple of times a second, not twenty."""
OVERRUN_GRACE = 1.0  # how long past the deadline a call may take to end by itself


class Stopped(Exception):
    """The attempt must stop: its deadline passed or it was cancelled."""


class LLMExecutor:
    """One attempt of a task done by a model; see the module docstring."""

    def __init__(
        self,
        model: Model,
        *,
        max_turns: int = 1,
        max_tokens: int | None = 4096,
        material_limit: int = MATERIAL_LIMIT,
        system: str = WORKER_SYSTEM,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        self.model = model
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.material_limit = material_limit
        self.system = system

    @classmethod
    def from_spec(cls, spec: str) -> LLMExecutor:
        """``""`` (the model from ``TENURE_MODEL``) or ``provider:model[@base_url]``."""
        return cls(open_model(spec or None))

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        return _Attempt(self, envelope, ctx).run()

    def __repr__(self) -> str:
        return f"LLMExecutor({self.model.provider}:{self.model.name})"


class _Attempt:
    def __init__(self, owner: LLMExecutor, envelope: TaskEnvelope, ctx: TaskContext) -> None:
        self.owner = owner
        self.model = owner.model
        self.env = envelope
        self.ctx = ctx
        self.meter = Meter(envelope.budget, price_of(owner.model))
        self.materials: dict[str, Material] = {}
        self.notes: list[str] = []
        self.stop = StopWhen(time.monotonic() + envelope.deadline_seconds, ctx.cancelled)

    def run(self) -> TaskResult:
        try:  # paths first: one leading out of the workdir or the scope costs no model call
            check_output_file(self.env, self.ctx.workdir)
            self.materials = read_materials(self.env, self.ctx.workdir, self.owner.material_limit)
        except ProtocolError as exc:
            return self._failed(str(exc))
        turns = self.owner.max_turns
        messages = [
            ChatMessage("system", self.owner.system),
            ChatMessage("user", render_envelope(self.env, self.materials, turns=turns)),
        ]
        turn, repaired, purpose = 1, False, "work"
        while True:
            schema = result_schema(self.env, more_turns=turn < turns)
            try:
                completion = self._call(messages, schema, purpose)
            except BudgetStop as stop:
                return self._stopped(f"{BUDGET_PREFIX}: {stop}")
            except Stopped as stop:
                return self._halted(str(stop))
            except ModelError as exc:
                if exc.kind == "stopped":
                    return self._halted(self.stop.why() or str(exc))
                return self._model_failed(exc)
            if completion.refusal:
                return self._finish(
                    {"status": "refused", "notes": {"uncertain": [completion.refusal]}}
                )
            try:
                answer = validate_answer(completion.text, self.env, more_turns=turn < turns)
            except InvalidAnswer as exc:
                if repaired:
                    return self._invalid_twice(str(exc), completion.text)
                repaired, purpose = True, "repair"
                messages += [
                    ChatMessage("assistant", completion.text),
                    ChatMessage("user", repair_message(str(exc))),
                ]
                continue
            if answer["status"] == "continue":
                progress = str(answer.get("progress") or f"turn {turn} of {turns} done")
                self.ctx.progress(progress, turn / turns)
                turn, purpose = turn + 1, "checkin"
                messages += [
                    ChatMessage("assistant", completion.text),
                    ChatMessage("user", checkin_message(self.env, turn, turns)),
                ]
                continue
            return self._finish(answer)

    # --- calls ----------------------------------------------------------------------------

    def _call(
        self, messages: list[ChatMessage], schema: dict[str, Any], purpose: str
    ) -> Completion:
        max_tokens = self.meter.allowance(messages, self.owner.max_tokens)
        why = self.stop.why()
        if why is not None:
            raise Stopped(why)
        completion = self._complete(messages, schema, max_tokens, purpose)
        self.meter.add(completion)
        self._count(completion, purpose)
        return completion

    def _complete(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        max_tokens: int | None,
        purpose: str,
    ) -> Completion:
        """The model's answer, waited for while the attempt may go on. The call runs on
        a thread of its own under the attempt's stop (``models.stop``), so a member that
        cancels the attempt is not kept waiting, and a model that ignores the deadline is
        left behind shortly after it; what such a call cost is logged when it ends."""
        box: dict[str, Any] = {}
        lock = threading.Lock()
        left_behind = threading.Event()
        ended = threading.Event()

        def run() -> None:
            try:
                with stopping(self.stop):
                    box["completion"] = traced.complete(
                        self.model, messages, json_schema=schema, max_tokens=max_tokens
                    )
            except BaseException as exc:  # handed over to the attempt's own thread
                box["error"] = exc
            with lock:
                box["done"] = True
                late = left_behind.is_set()
            ended.set()
            if late and "completion" in box:
                self._count(box["completion"], purpose, abandoned=True)

        thread = threading.Thread(
            target=observe.carried(run), daemon=True, name="tenure-model-call"
        )
        thread.start()
        while True:
            ended.wait(self._look_again())
            with lock:
                if box.get("done"):
                    break
                why = self._give_up()
                if why is not None:
                    left_behind.set()
                    raise Stopped(why)
        if "error" in box:
            raise box["error"]
        completion: Completion = box["completion"]
        return completion

    def _look_again(self) -> float:
        """Seconds until the waiting attempt looks again: at the deadline's grace, or
        ``LOOK_SECONDS`` for a cancellation, whichever is first."""
        left = self.stop.left()
        if left is None:
            return LOOK_SECONDS
        return min(LOOK_SECONDS, max(0.01, left + OVERRUN_GRACE + 0.01))

    def _give_up(self) -> str | None:
        """Why to stop waiting for the call in flight: the member cancelled the attempt,
        or the deadline passed and the call did not end by itself within the grace."""
        why = self.stop.why()
        if why is None:
            return None
        if self.ctx.cancelled.is_set():
            return why
        left = self.stop.left()
        return why if left is not None and left < -OVERRUN_GRACE else None

    def _count(self, completion: Completion, purpose: str, *, abandoned: bool = False) -> None:
        extra = {"abandoned": True} if abandoned else {}
        self.ctx.record(
            "model.call",
            {
                "task_id": self.env.task_id,
                "attempt": self.env.attempt,
                "purpose": purpose,
                "model": f"{completion.provider}:{completion.model}",
                "input_tokens": completion.usage.input_tokens,
                "output_tokens": completion.usage.output_tokens,
                "cache_read_tokens": completion.usage.cache_read_tokens,
                "cache_write_tokens": completion.usage.cache_write_tokens,
                "cost_usd": round(completion.usage.cost_usd, 8),
                "priced": completion.priced,
                "seconds": round(completion.seconds, 3),
                **extra,
            },
        )
        if completion.fallback:
            self.ctx.record(
                "model.fallback",
                {
                    "task_id": self.env.task_id,
                    "attempt": self.env.attempt,
                    "model": f"{completion.provider}:{completion.model}",
                    "reason": completion.fallback,
                },
            )

    # --- results ----------------------------------------------------------------------------

    def _finish(self, answer: dict[str, Any]) -> TaskResult:
        status = answer["status"]
        notes = dict(answer.get("notes") or {})
        uncertain = [*notes.get("uncertain", []), *self.notes]
        evidence = self._stamp(answer.get("evidence") or [], uncertain)
        fields: dict[str, Any] = {
            "artifact": answer.get("artifact"),
            "notes": {**notes, "uncertain": uncertain},
            "evidence": evidence,
            "grounding": [
                {"input": m.name, "at": m.read_at.isoformat()} for m in self.materials.values()
            ],
            "usage": self.meter.spend(self.model),
        }
        if answer.get("question"):
            fields["question"] = answer["question"]
        if answer.get("confidence") is not None:
            fields["confidence"] = answer["confidence"]
        over = self.meter.overrun()
        if over:  # the last call went past the budget; its answer is kept, and said so
            uncertain.append(f"{BUDGET_PREFIX} by the last call: {over}")
        if status == "completed":
            problem = self._write_output(answer.get("artifact"), fields)
            if problem:
                return self._failed(problem)
        return make_result(self.env, status, **fields)

    def _stamp(self, items: list[dict[str, Any]], uncertain: list[str]) -> list[dict[str, Any]]:
        """Sources the model cites get the time the executor read them; a source it was
        never given is dropped (and said so), so the evidence check sees the gap."""
        out = []
        for item in items:
            material = self._material(str(item.get("source", "")))
            if material is None:
                uncertain.append(f"cited source {item.get('source')!r} was not given; dropped")
                continue
            out.append(
                {
                    "kind": "source",
                    "source": material.name,
                    "retrieved_at": material.read_at.isoformat(),
                    "field": item.get("field"),
                }
            )
        return out

    def _material(self, source: str) -> Material | None:
        if source in self.materials:
            return self.materials[source]
        for material in self.materials.values():
            if source in (material.path.name, str(material.path)):
                return material
        return None

    def _write_output(self, artifact: Any, fields: dict[str, Any]) -> str | None:
        """``input.output_file``: write the artifact there as JSON, if the scope and the
        workdir allow it (checked again now: a symlink may have appeared meanwhile)."""
        target = self.env.input.get("output_file")
        if not isinstance(target, str) or not target:
            return None
        workdir = self.ctx.workdir

        def write() -> str:
            path = check_output_file(self.env, workdir)
            assert path is not None
            path.parent.mkdir(parents=True, exist_ok=True)
            path = check_output_file(self.env, workdir)  # the parents made are ours
            assert path is not None
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8") as handle:
                handle.write(json.dumps(artifact, indent=2) + "\n")
            return target

        try:
            written = self.ctx.effect(f"write:{target}", write)
        except (ProtocolError, OSError) as exc:
            return f"output_file not written: {exc}"
        fields["notes"]["changed"] = [*fields["notes"].get("changed", []), written]
        return None

    def _failed(self, reason: str, *, output: str = "") -> TaskResult:
        return make_result(
            self.env,
            "failed",
            notes={"uncertain": [reason]},
            evidence=[
                {
                    "kind": "command",
                    "command": f"(model {self.model.provider}:{self.model.name})",
                    "exit_code": 1,
                    "output": (output or reason)[-2000:],
                }
            ],
            usage=self.meter.spend(self.model),
        )

    def _halted(self, why: str) -> TaskResult:
        """The attempt stopped for its deadline or a cancellation: failed, with what it
        spent until then (the leader charges it and may retry)."""
        reason = (
            f"{STOPPED_PREFIX}: {why} (deadline {self.env.deadline_seconds:g}s, "
            f"{self.meter.calls} model calls made)"
        )
        self.ctx.record("attempt.stopped", {"task_id": self.env.task_id, "reason": reason})
        return self._failed(reason)

    def _stopped(self, reason: str) -> TaskResult:
        self.ctx.record("budget.stopped", {"task_id": self.env.task_id, "reason": reason})
        return self._failed(reason)

    def _invalid_twice(self, error: str, text: str) -> TaskResult:
        return self._failed(
            f"the model's answer was not a valid result, also after one repair: {error}",
            output=text,
        )

    def _model_failed(self, exc: ModelError) -> TaskResult:
        if exc.kind in ("auth", "bad_request"):  # a person must fix this; retrying won't
            return make_result(
                self.env,
                "blocked",
                question=f"the model call was refused ({exc.kind}): {exc}; fix the model "
                "settings (key, model name, base URL), then answer to retry",
                usage=self.meter.spend(self.model),
            )
        return self._failed(f"model call failed ({exc.kind}): {exc}")
