"""Every parser, fuzzed: whatever comes in, out comes a typed value or one
``ProtocolError`` of one line — never another exception, never a crash.

Inputs are arbitrary bytes and text, arbitrary JSON, valid messages with one part
replaced by something random, deep nests, YAML with anchors and aliases, and
executor outputs of any shape.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure.executors import coerce_result, safe_result
from tenure.protocol import (
    Plan,
    ProtocolError,
    TaskEnvelope,
    TaskResult,
    parse_envelope,
    parse_message,
    parse_plan,
    parse_result,
)
from tenure.protocol.limits import MAX_RESULT_BYTES, decode_json, json_size
from tenure.protocol.messages import TaskProgress
from tenure.store.payload import read_payload

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ENVELOPE: dict[str, Any] = {
    "task_id": "t1",
    "idempotency_key": "t1:attempt-1",
    "epoch": 3,
    "attempt": 1,
    "assigned_to": "w1",
    "deadline_seconds": 60,
    "goal": "Say hello",
    "checks": [{"kind": "schema", "schema": {"type": "object"}}],
    "input": {"n": 1},
}
RESULT: dict[str, Any] = {
    "task_id": "t1",
    "idempotency_key": "t1:attempt-1",
    "epoch": 3,
    "status": "completed",
    "artifact": {"greeting": "hello"},
    "evidence": [{"kind": "command", "command": "true", "exit_code": 0}],
}
PROGRESS: dict[str, Any] = {"task_id": "t1", "idempotency_key": "t1:attempt-1", "attempt": 1}
BODIES = {"task.assign": ENVELOPE, "task.result": RESULT, "task.progress": PROGRESS}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=40,
)


def message(kind: str) -> dict[str, Any]:
    return {
        "v": 1,
        "type": kind,
        "team": "acme/fuzz",
        "from": "w1",
        "to": "leader",
        "epoch": 3,
        "body": copy.deepcopy(BODIES[kind]),
    }


def deep(depth: int, leaf: Any = 1, as_list: bool = False) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


def one_line(exc: ProtocolError) -> None:
    text = str(exc)
    assert text and "\n" not in text, text
    assert exc.field, text


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with one field, at any depth, replaced by something random."""
    data = message(draw(st.sampled_from(sorted(BODIES))))
    node: Any = data
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, dict | list) or not child or draw(st.booleans()):
            node[key] = draw(json_values | st.builds(deep, st.integers(60, 3000)))
            break
        node = child
    return data


# --- messages -------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=300))
def test_parse_message_of_any_bytes_or_text(data: bytes | str) -> None:
    try:
        parse_message(data)
    except ProtocolError as exc:
        one_line(exc)


@FUZZ
@given(json_values)
def test_parse_message_of_any_json(value: Any) -> None:
    for data in (value, json.dumps(value)):
        try:
            parse_message(data)
        except ProtocolError as exc:
            one_line(exc)


@FUZZ
@given(mutated())
def test_parse_message_of_a_valid_message_with_one_part_replaced(data: dict[str, Any]) -> None:
    try:
        parsed = parse_message(data)
    except ProtocolError as exc:
        one_line(exc)
        return
    assert isinstance(parsed.body, TaskEnvelope | TaskResult | TaskProgress)


@FUZZ
@given(st.integers(min_value=1, max_value=200_000), st.booleans())
def test_parse_message_of_any_depth(depth: int, as_list: bool) -> None:
    data = message("task.result")
    data["body"]["artifact"] = deep(depth, as_list=as_list)
    text = json.dumps(data) if depth < 900 else None
    for each in (data, text) if text else (data,):
        try:
            parse_message(each)
        except ProtocolError as exc:
            one_line(exc)
            assert depth > 60
    raw = json.dumps(message("task.result"))[:-2] + ',"x":' + "[" * depth + "]" * depth + "}}"
    try:
        parse_message(raw)
    except ProtocolError as exc:
        one_line(exc)


@FUZZ
@given(json_values, st.sampled_from(["envelope", "result"]))
def test_parse_envelope_and_result_of_any_json(value: Any, which: str) -> None:
    base = copy.deepcopy(ENVELOPE if which == "envelope" else RESULT)
    for data in (value, {**base, "input" if which == "envelope" else "artifact": value}):
        try:
            (parse_envelope if which == "envelope" else parse_result)(data)
        except ProtocolError as exc:
            one_line(exc)


# --- stored payloads and plain JSON ---------------------------------------------------


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=300) | json_values.map(json.dumps))
def test_a_stored_payload_always_reads_as_an_object_or_a_reason(data: bytes | str) -> None:
    payload, problem = read_payload(data)
    assert isinstance(payload, dict)
    assert (problem is None) or (payload == {} and "\n" not in problem)


@FUZZ
@given(st.integers(min_value=1, max_value=300_000))
def test_decode_json_of_any_depth_is_a_value_or_a_protocol_error(depth: int) -> None:
    try:
        decode_json("[" * depth + "]" * depth, limit=10**7)
    except ProtocolError as exc:
        one_line(exc)
        assert depth > 64


# --- plans ----------------------------------------------------------------------------

anchored_yaml = st.builds(
    lambda n, width, reps: "\n".join(
        [f"a0: &a0 [{', '.join(['x'] * width)}]"]
        + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * reps)}]" for i in range(1, n)]
        + ["tasks: [{id: t, goal: g}]"]
    ),
    st.integers(1, 12),
    st.integers(1, 12),
    st.integers(1, 12),
)


tricky_scalars = st.sampled_from(
    [
        "9" * 5000,
        "2024-13-45",
        "2024-02-30 25:61:61",
        "!!binary 'not base64!'",
        "!!python/object/apply:os.system ['true']",
        "!!float nan",
        "!!int 0x",
        "!!timestamp yesterday",
        "!!set {a, b}",
        "&x *x",
        "<<: *nowhere",
        "\t\x00",
        "'\ud800'",
    ]
)
tricky_yaml = st.builds(
    lambda scalar, where: {
        "input": f"tasks: [{{id: a, goal: g, input: {{x: {scalar}}}}}]",
        "goal": f"tasks:\n  - id: a\n    goal: {scalar}\n",
        "top": f"team: {scalar}\ntasks: [{{id: a, goal: g}}]",
    }[where],
    tricky_scalars,
    st.sampled_from(["input", "goal", "top"]),
)


@FUZZ
@given(st.text(max_size=400) | anchored_yaml | tricky_yaml | json_values.map(json.dumps))
def test_parse_plan_of_any_text(text: str) -> None:
    for markdown in (False, True):
        try:
            plan = parse_plan(text, markdown=markdown)
        except ProtocolError as exc:
            one_line(exc)
        else:
            assert isinstance(plan, Plan)


@FUZZ
@given(json_values, st.sampled_from(["goal", "input", "acceptance_criteria", "team", "checks"]))
def test_parse_plan_of_a_valid_plan_with_one_field_replaced(value: Any, field: str) -> None:
    task: dict[str, Any] = {"id": "t", "goal": "g", field: value}
    for text in (json.dumps({"tasks": [task]}), json.dumps({"tasks": [task], field: value})):
        try:
            parse_plan(text)
        except ProtocolError as exc:
            one_line(exc)


# --- executor output ------------------------------------------------------------------


@FUZZ
@given(
    json_values
    | st.builds(deep, st.integers(60, 5000))
    | st.builds(lambda n: "x" * n, st.integers(MAX_RESULT_BYTES - 50, MAX_RESULT_BYTES + 50))
    | st.builds(lambda v: {"status": "completed", "artifact": v}, json_values)
    | st.builds(lambda s: {"status": s}, st.text(max_size=10))
)
def test_any_executor_output_becomes_a_result_that_fits_in_a_message(value: Any) -> None:
    envelope = parse_envelope(ENVELOPE)
    result = safe_result(envelope, lambda: value)
    assert isinstance(result, TaskResult)
    assert json_size(result.model_dump(mode="json")) <= MAX_RESULT_BYTES
    try:
        coerce_result(envelope, value)
    except ProtocolError as exc:
        one_line(exc)
