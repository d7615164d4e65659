"""docs/protocol.md stays true to the models: every field, its required-ness and default."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tenure.protocol import (
    FENCED_TYPES,
    MAX_BODY_BYTES,
    MESSAGE_TYPES,
    Budget,
    CommandCheck,
    CommandEvidence,
    EvidenceCheck,
    Grounding,
    JudgeCheck,
    Notes,
    Plan,
    PlanTask,
    PriorAttempt,
    QuorumCheck,
    SchemaCheck,
    SourceEvidence,
    Spend,
    TaskEnvelope,
    TaskResult,
)
from tenure.protocol.codec import MAX_MESSAGE_BYTES
from tenure.protocol.envelope import Signature
from tenure.protocol.messages import (
    EscalationAnswer,
    EscalationAsk,
    JoinMessage,
    LeadershipClaim,
    LeadershipHeartbeat,
    LeadershipRelease,
    MemberHeartbeat,
    MemberJoin,
    MemberLeave,
    PlanUpdate,
    TaskCancel,
    TaskProgress,
)
from tenure.protocol.plan import SubTeam
from tenure.protocol.taskspec import AttemptData, ChildRecord, Grant, TaskSpec

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
TEXT = DOC.read_text(encoding="utf-8")
LINES = TEXT.splitlines()

# heading text (after the #s) -> the model its first table documents
SECTIONS: dict[str, type[BaseModel]] = {
    "Header": JoinMessage,
    "`LeadershipClaim`": LeadershipClaim,
    "`LeadershipHeartbeat`": LeadershipHeartbeat,
    "`LeadershipRelease`": LeadershipRelease,
    "`MemberJoin`": MemberJoin,
    "`MemberHeartbeat`": MemberHeartbeat,
    "`MemberLeave`": MemberLeave,
    "`TaskProgress`": TaskProgress,
    "`TaskCancel`": TaskCancel,
    "`EscalationAsk`": EscalationAsk,
    "`EscalationAnswer`": EscalationAnswer,
    "`PlanUpdate`": PlanUpdate,
    "Task envelope (`task.assign`)": TaskEnvelope,
    "`schema` (`SchemaCheck`)": SchemaCheck,
    "`evidence` (`EvidenceCheck`)": EvidenceCheck,
    "`command` (`CommandCheck`)": CommandCheck,
    "`judge` (`JudgeCheck`)": JudgeCheck,
    "`quorum` (`QuorumCheck`)": QuorumCheck,
    "Result (`task.result`)": TaskResult,
    "Budgets and spend": Budget,
    "Plans": Plan,
    "Plan task": PlanTask,
    "Nested team": SubTeam,
    "Signatures": Signature,
}
# tables that follow a paragraph naming the model rather than a heading
PARAGRAPHS: dict[str, type[BaseModel]] = {
    "Each `history` entry (`PriorAttempt`)": PriorAttempt,
    "`notes` (`Notes`)": Notes,
    "Each `grounding` entry (`Grounding`)": Grounding,
    "`command` (`CommandEvidence`)": CommandEvidence,
    "`source` (`SourceEvidence`)": SourceEvidence,
    "A **spend** (`Spend`)": Spend,
    "The attempt data (`AttemptData`)": AttemptData,
    "Each `children` entry (`ChildRecord`)": ChildRecord,
    "The `grant` (`Grant`)": Grant,
}
WIRE_REQUIRED = {"type", "body", "kind"}  # have a Python default, but the wire needs them
NOT_JSON_DEFAULTS = {"a new ULID", "now", "all lists empty"}


def table_after(start: int) -> list[list[str]]:
    """The rows (cells stripped) of the first Markdown table after line ``start``."""
    rows: list[list[str]] = []
    for line in LINES[start + 1 :]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows or line.startswith("#"):
            break
    assert rows, f"no table after line {start + 1} of {DOC.name}"
    return rows[1:]  # without the header row


def find(prefix: str, *, heading: bool) -> int:
    for index, line in enumerate(LINES):
        text = line.lstrip("#").strip() if line.startswith("#") else None
        if heading and text == prefix:
            return index
        if not heading and line.startswith(prefix):
            return index
    raise AssertionError(f"{DOC.name} has no {'heading' if heading else 'paragraph'} {prefix!r}")


def documented(model: type[BaseModel]) -> dict[str, tuple[str, str]]:
    for title, each in SECTIONS.items():
        if each is model:
            rows = table_after(find(title, heading=True))
            break
    else:
        title = next(t for t, each in PARAGRAPHS.items() if each is model)
        rows = table_after(find(title, heading=False))
    out = {}
    for row in rows:
        match = re.fullmatch(r"`([A-Za-z_]+)`", row[0])
        assert match, f"first cell {row[0]!r} is not a `field`"
        out[match.group(1)] = (row[1], row[2])
    return out


def wire_fields(model: type[BaseModel]) -> dict[str, Any]:
    return {(info.alias or name): info for name, info in model.model_fields.items()}


ALL_MODELS = [*SECTIONS.values(), *PARAGRAPHS.values()]


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_every_field_is_documented_once_and_nothing_else(model: type[BaseModel]) -> None:
    assert set(documented(model)) == set(wire_fields(model))


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_required_fields_and_defaults_match_the_model(model: type[BaseModel]) -> None:
    doc = documented(model)
    for name, info in wire_fields(model).items():
        _, default = doc[name]
        if name in WIRE_REQUIRED or info.is_required():
            assert default == "required", f"{model.__name__}.{name}: doc says {default!r}"
            continue
        assert default != "required", f"{model.__name__}.{name} has a default"
        if default in NOT_JSON_DEFAULTS:
            continue
        value = info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
        shown = None if default == "null" else json.loads(default.strip("`"))
        assert shown == value, f"{model.__name__}.{name}: doc default {default}, model {value!r}"


def test_the_type_table_lists_every_type_and_its_epoch_rule() -> None:
    rows = table_after(find("Message types", heading=True))
    table = {row[0].strip("`"): row[1] for row in rows}
    assert list(table) == list(MESSAGE_TYPES)
    for kind, epoch in table.items():
        assert epoch == ("required" if kind in FENCED_TYPES else "optional"), kind


def test_every_fenced_type_is_named_in_the_fencing_section() -> None:
    start = find("Fencing: which types carry an epoch", heading=True)
    section = "\n".join(LINES[start : start + 40])
    for kind in FENCED_TYPES:
        assert f"`{kind}`" in section


def test_the_check_kinds_table_lists_every_kind_in_ladder_order() -> None:
    rows = table_after(find("Checks", heading=True))
    assert [row[0].strip("`") for row in rows] == [
        "schema",
        "evidence",
        "judge",
        "quorum",
        "command",
    ]


def test_the_size_limits_are_the_real_ones() -> None:
    assert MAX_BODY_BYTES == 256 * 1024
    assert "**256 KiB** (262,144 bytes)" in TEXT
    assert f"{MAX_MESSAGE_BYTES // 1024} KiB ({MAX_MESSAGE_BYTES:,} bytes)" in TEXT


def test_the_limits_table_lists_every_limit_with_its_value() -> None:
    """One row per constant of ``tenure.protocol.limits``, showing its value."""
    from tenure.protocol.limits import LIMITS

    section = TEXT.split("## Size limits", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[2]
        for line in section.splitlines()
        if line.startswith("| `MAX_")
    }
    assert sorted(rows) == sorted(LIMITS)
    for name, value in LIMITS.items():
        assert f"{value:,}" in rows[name] or str(value) in rows[name], (name, rows[name])


def test_the_plan_example_in_the_doc_is_a_valid_plan() -> None:
    from tenure.protocol import parse_plan

    start = TEXT.index("```yaml\nteam: acme/research")
    block = TEXT[start + len("```yaml\n") : TEXT.index("```\n", start + 8)]
    plan = parse_plan(block)
    assert [task.id for task in plan.tasks] == ["plan-list", "price-check", "report"]


def test_the_message_example_in_the_doc_is_valid() -> None:
    from tenure.protocol import parse_message

    start = TEXT.index("```json\n")
    block = TEXT[start + len("```json\n") : TEXT.index("```\n", start + 8)]
    assert parse_message(block).type == "leadership.claim"


def test_the_task_spec_table_lists_what_the_register_adds_to_a_plan_task() -> None:
    rows = table_after(find("The spec (`TaskSpec`)", heading=False))
    added = {re.fullmatch(r"`([A-Za-z_]+)`", row[0]).group(1) for row in rows}  # type: ignore[union-attr]
    own = {name for name in TaskSpec.model_fields if name not in PlanTask.model_fields}
    assert added == own | {"max_attempts"}  # resolved here, optional in a plan
