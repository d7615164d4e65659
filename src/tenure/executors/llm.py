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
totals travel in ``result.usage``. An envelope's ``budget`` (what the task and
the team have left) is enforced between calls and caps each call's
``max_tokens``: running out stops the attempt with a ``budget exceeded`` reason.
"""

from __future__ import annotations

import fnmatch
import json
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema

from tenure.executors.base import TaskContext, make_result
from tenure.models import ChatMessage, Completion, Model, ModelError, Price, default_prices
from tenure.models.select import open_model
from tenure.protocol import ProtocolError, TaskEnvelope, TaskResult
from tenure.protocol.envelope import Budget, CommandCheck, EvidenceCheck, SchemaCheck

FINAL_STATUSES = ("completed", "blocked", "refused", "failed")
MATERIAL_LIMIT = 20_000  # characters of one file shown to the model
BUDGET_PREFIX = "budget exceeded"
SKIP_INPUT_KEYS = ("from_dependencies", "operator_answers")

WORKER_SYSTEM = """\
You are a worker on a Tenure team. You do exactly one task and report on it honestly.
- Meet every acceptance criterion. They come first because they decide whether your work is accepted.
- Use only the input and the materials you are given. A value you cannot find is null: never estimate or invent one.
- Give each value you report a source in "evidence": {"source": <material name>, "field": <artifact field>}.
- If you cannot go on without information you do not have, answer status "blocked" with a "question".
- If the task asks for something you must not do, answer status "refused" and say why in notes.uncertain.
- If you tried and could not do it, answer status "failed" and say why in notes.uncertain.
- Never claim in notes.verified that you checked something you did not check.
Reply with one JSON object in the output schema and nothing else."""


@dataclass
class Material:
    """A file named in the input, read for the model."""

    name: str
    path: Path
    text: str
    read_at: datetime


@dataclass
class Meter:
    """What this attempt has spent so far, against the envelope's budget."""

    budget: Budget | None
    price: Price | None
    started: float = field(default_factory=time.monotonic)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, completion: Completion) -> None:
        self.input_tokens += completion.usage.input_tokens
        self.output_tokens += completion.usage.output_tokens
        self.cost_usd += completion.usage.cost_usd
        self.calls += 1
        self.unpriced += 0 if completion.priced else 1

    def allowance(self, messages: list[ChatMessage], wanted: int | None) -> int | None:
        """``max_tokens`` for the next call within the budget; BudgetStop if none is left."""
        budget = self.budget
        if budget is None:
            return wanted
        prompt = estimate_tokens(messages)
        limit = wanted if wanted is not None else math.inf
        if budget.wall_seconds is not None:
            elapsed = time.monotonic() - self.started
            if elapsed >= budget.wall_seconds:
                raise BudgetStop(
                    f"wall time: {elapsed:.1f}s used of the {budget.wall_seconds:g}s left"
                )
        if budget.tokens is not None:
            left = budget.tokens - self.tokens - prompt
            if left <= 0:
                raise BudgetStop(
                    f"tokens: the next call needs ~{prompt} prompt tokens, "
                    f"{budget.tokens - self.tokens} of the {budget.tokens} left"
                )
            limit = min(limit, left)
        if budget.cost_usd is not None:
            if self.price is None:
                raise BudgetStop(
                    "cost: a cost budget is set but the price table has no price for this "
                    "model; add it (TENURE_PRICES) or drop the cost limit"
                )
            left_usd = budget.cost_usd - self.cost_usd - prompt * self.price.input_per_mtok / 1e6
            if left_usd <= 0:
                raise BudgetStop(
                    f"cost: ${self.cost_usd:.4f} spent of the ${budget.cost_usd:g} left"
                )
            if self.price.output_per_mtok > 0:
                limit = min(limit, int(left_usd / self.price.output_per_mtok * 1e6))
        if limit == math.inf:
            return None
        return max(1, int(limit))

    def overrun(self) -> str | None:
        budget = self.budget
        if budget is None:
            return None
        if budget.tokens is not None and self.tokens > budget.tokens:
            return f"tokens: {self.tokens} used of the {budget.tokens} left"
        if budget.cost_usd is not None and self.cost_usd > budget.cost_usd:
            return f"cost: ${self.cost_usd:.4f} spent of the ${budget.cost_usd:g} left"
        return None

    def spend(self, model: Model) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "calls": self.calls,
            "unpriced": self.unpriced,
            "model": f"{model.provider}:{model.name}",
        }


class BudgetStop(Exception):
    """The envelope's budget leaves no room for the next call."""


class InvalidAnswer(ValueError):
    """The model's answer is not a valid result; the message says why, for the repair."""


def estimate_tokens(messages: list[ChatMessage]) -> int:
    """A conservative prompt size: about four characters a token."""
    return sum(len(m.content) for m in messages) // 4 + 4 * len(messages)


def price_of(model: Model) -> Price | None:
    own = getattr(model, "price", None)
    if isinstance(own, Price):
        return own
    table = getattr(model, "prices", None) or default_prices()
    price: Price | None = table.price(model.provider, model.name)
    return price


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
        self.materials = read_materials(envelope, ctx.workdir, owner.material_limit)
        self.notes: list[str] = []

    def run(self) -> TaskResult:
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
            except ModelError as exc:
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
        completion = self.model.complete(messages, json_schema=schema, max_tokens=max_tokens)
        self.meter.add(completion)
        self.ctx.record(
            "model.call",
            {
                "task_id": self.env.task_id,
                "attempt": self.env.attempt,
                "purpose": purpose,
                "model": f"{completion.provider}:{completion.model}",
                "input_tokens": completion.usage.input_tokens,
                "output_tokens": completion.usage.output_tokens,
                "cost_usd": round(completion.usage.cost_usd, 8),
                "priced": completion.priced,
                "seconds": round(completion.seconds, 3),
            },
        )
        return completion

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
        """``input.output_file``: write the artifact there as JSON, if the scope allows it."""
        target = self.env.input.get("output_file")
        if not isinstance(target, str) or not target:
            return None
        if not in_scope(target, self.env.scope):
            return f"output_file {target!r} is outside the task's scope {self.env.scope}"
        path = (self.ctx.workdir or Path(".")) / target

        def write() -> str:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
            return target

        written = self.ctx.effect(f"write:{target}", write)
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


# --- rendering ---------------------------------------------------------------------------


def render_envelope(
    envelope: TaskEnvelope, materials: dict[str, Material] | None = None, *, turns: int = 1
) -> str:
    """The envelope as the model reads it: criteria first, output schema last."""
    parts = ["## Acceptance criteria (your work is judged by these)"]
    parts += _criteria(envelope)
    checks = [_describe_check(c) for c in envelope.checks]
    if envelope.output_schema is not None and not any(
        isinstance(c, SchemaCheck) for c in envelope.checks
    ):
        checks.append("schema: the artifact must match the output schema below")
    if checks:
        parts += ["", "## Checks the leader runs on your result", *[f"- {c}" for c in checks]]
    parts += ["", "## Goal", envelope.goal]
    shown_input = {k: v for k, v in envelope.input.items() if k not in SKIP_INPUT_KEYS}
    if shown_input:
        parts += ["", "## Input", _json_block(shown_input)]
    deps = envelope.input.get("from_dependencies")
    if deps:
        parts += ["", "## Results of the tasks this one depends on", _json_block(deps)]
    answers = envelope.input.get("operator_answers")
    if answers:
        parts += ["", "## Answers from the operator", _json_block(answers)]
    if materials:
        parts += ["", "## Materials (files named in the input, read for you)"]
        for material in materials.values():
            parts += [
                f"### {material.name} (read {material.read_at.isoformat(timespec='seconds')})",
                "```",
                material.text,
                "```",
            ]
    if envelope.scope:
        parts += ["", "## Scope (the only things you may change)"]
        parts += [f"- {item}" for item in envelope.scope]
    if envelope.history:
        parts += ["", "## Earlier attempts that failed (do not repeat these mistakes)"]
        parts += [f"- attempt {h.attempt} ({h.status}): {h.failure}" for h in envelope.history]
    parts += ["", "## Output", "Reply with one JSON object in this schema:"]
    parts.append(_json_block(result_schema(envelope, more_turns=turns > 1)))
    if turns > 1:
        parts.append(
            f'You have up to {turns} turns. Answer status "continue" with a short "progress" '
            "note to take another turn; the last turn must give a final status."
        )
    return "\n".join(parts)


def checkin_message(envelope: TaskEnvelope, turn: int, turns: int) -> str:
    """The check-in between turns: the criteria restated, every time."""
    last = turn >= turns
    return "\n".join(
        [
            f"Check-in: turn {turn} of {turns}. The acceptance criteria, restated:",
            *_criteria(envelope),
            f"Goal: {envelope.goal}",
            "This is your last turn: give a final status (completed, blocked, refused or failed)."
            if last
            else 'Continue. Reply with the next JSON object ("continue" or a final status).',
        ]
    )


def repair_message(error: str) -> str:
    return (
        f"Your reply was not a valid result: {error}\n"
        "Reply again with only the corrected JSON object, in the output schema."
    )


def _criteria(envelope: TaskEnvelope) -> list[str]:
    if not envelope.acceptance_criteria:
        return ["(none stated beyond the goal)"]
    return [f"{n}. {text}" for n, text in enumerate(envelope.acceptance_criteria, 1)]


def _describe_check(check: Any) -> str:
    if isinstance(check, SchemaCheck):
        return "schema: the artifact must match the output schema below"
    if isinstance(check, EvidenceCheck):
        age = f" retrieved within {check.max_age_seconds:g}s" if check.max_age_seconds else ""
        return f"evidence: every known value needs a cited source{age}; unknown values are null"
    if isinstance(check, CommandCheck):
        return f"command: the leader runs `{check.run}` and expects exit {check.expect_exit}"
    return f"{check.kind}: see the criteria"


def _json_block(value: Any) -> str:
    return "```json\n" + json.dumps(value, indent=2, default=str) + "\n```"


# --- the answer ----------------------------------------------------------------------------


def result_schema(
    envelope: TaskEnvelope, *, more_turns: bool = False, with_artifact: bool = True
) -> dict[str, Any]:
    """The JSON Schema of the model's answer (structured output and validation).

    ``with_artifact=False`` leaves the artifact open: validation checks it against the
    task's output schema separately, only when the status is ``completed``."""
    statuses = [*FINAL_STATUSES, "continue"] if more_turns else list(FINAL_STATUSES)
    strings = {"type": "array", "items": {"type": "string"}}
    artifact: dict[str, Any] = (
        {"anyOf": [envelope.output_schema, {"type": "null"}]}
        if envelope.output_schema is not None and with_artifact
        else {}
    )
    properties: dict[str, Any] = {
        "status": {"type": "string", "enum": statuses},
        "artifact": artifact,
        "notes": {
            "type": "object",
            "properties": {"changed": strings, "verified": strings, "uncertain": strings},
            "additionalProperties": False,
        },
        "evidence": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["source"],
                "properties": {
                    "source": {"type": "string"},
                    "field": {"type": ["string", "null"]},
                },
                "additionalProperties": False,
            },
        },
        "question": {"type": ["string", "null"]},
        "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    }
    if more_turns:
        properties["progress"] = {"type": "string"}
    return {
        "type": "object",
        "required": ["status"],
        "properties": properties,
        "additionalProperties": False,
    }


def validate_answer(
    text: str, envelope: TaskEnvelope, *, more_turns: bool = False
) -> dict[str, Any]:
    """The model's answer as a dict, or InvalidAnswer saying exactly what is wrong."""
    try:
        value = Completion(text).json()
    except ValueError as exc:
        raise InvalidAnswer(f"it is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidAnswer(f"it is a JSON {type(value).__name__}, not an object")
    _validate(value, result_schema(envelope, more_turns=more_turns, with_artifact=False), "")
    status = value["status"]
    if status == "completed" and envelope.output_schema is not None:
        _validate(value.get("artifact"), envelope.output_schema, "/artifact")
    if status == "blocked" and not value.get("question"):
        raise InvalidAnswer('status "blocked" needs a "question" saying what you need')
    if status in ("refused", "failed") and not (value.get("notes") or {}).get("uncertain"):
        raise InvalidAnswer(f'status "{status}" needs the reason in notes.uncertain')
    if status != "continue":
        try:
            probe = {k: v for k, v in value.items() if k not in ("evidence", "progress")}
            TaskResult.model_validate(
                {
                    **probe,
                    "task_id": envelope.task_id,
                    "idempotency_key": envelope.idempotency_key,
                    "epoch": envelope.epoch,
                }
            )
        except (ProtocolError, ValueError) as exc:
            raise InvalidAnswer(str(exc).splitlines()[0]) from None
    return value


def _validate(value: Any, schema: dict[str, Any], prefix: str) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = prefix + "".join(f"/{p}" for p in first.absolute_path) or "(the answer)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InvalidAnswer(f"at {where}: {first.message}{more}")


# --- materials and scope -------------------------------------------------------------------


def read_materials(
    envelope: TaskEnvelope, workdir: Path | None, limit: int = MATERIAL_LIMIT
) -> dict[str, Material]:
    """Files the input names (relative paths inside the workdir), read now; the task's own
    ``output_file`` is what it writes, not what it reads."""
    root = (workdir or Path(".")).resolve()
    out: dict[str, Material] = {}
    named = {k: v for k, v in envelope.input.items() if k not in (*SKIP_INPUT_KEYS, "output_file")}
    for name in _strings(named):
        if name in out or "://" in name or len(name) > 500 or "\n" in name:
            continue
        path = (root / name).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if len(text) > limit:
            text = text[:limit] + f"\n[... cut at {limit} characters]"
        out[name] = Material(name, path, text, datetime.now(UTC))
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def in_scope(path: str, scope: list[str]) -> bool:
    """True if ``path`` is a scope entry, lies under a directory entry, or matches a glob."""
    clean = path.strip("/")
    for entry in scope:
        item = entry.strip("/")
        if clean == item or clean.startswith(f"{item}/") or fnmatch.fnmatch(clean, item):
            return True
    return False
