"""Bad input: each case raises one ``ProtocolError`` that names the offending field.

And nothing else ever escapes: arbitrary JSON, text and bytes give a message
or a ``ProtocolError``, never a ``TypeError`` or a ``RecursionError``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.protocol import (
    FENCED_TYPES,
    MAX_BODY_BYTES,
    MESSAGE_TYPES,
    ProtocolError,
    load_plan,
    new_id,
    parse_envelope,
    parse_message,
    parse_plan,
    parse_result,
)
from tenure.protocol.codec import MAX_MESSAGE_BYTES
from tenure.protocol.messages import body_size

EPOCH = 7
ENVELOPE: dict[str, Any] = {
    "task_id": "t1",
    "idempotency_key": "t1:attempt-2",
    "epoch": EPOCH,
    "attempt": 2,
    "assigned_to": "worker-1",
    "deadline_seconds": 60,
    "goal": "Say hello",
    "acceptance_criteria": ["The greeting is polite"],
    "checks": [{"kind": "command", "run": "true"}],
}
RESULT: dict[str, Any] = {
    "task_id": "t1",
    "idempotency_key": "t1:attempt-2",
    "epoch": EPOCH,
    "status": "completed",
    "artifact": {"greeting": "hello"},
}
BODIES: dict[str, dict[str, Any]] = {
    "leadership.claim": {"holder": "n1", "ttl_seconds": 10, "priority": 5},
    "leadership.heartbeat": {"holder": "n1", "ttl_seconds": 10},
    "leadership.release": {"holder": "n1", "reason": "shutting down"},
    "member.join": {"member": "n2", "capabilities": ["lead"], "highest_epoch": 3},
    "member.heartbeat": {"member": "n2", "highest_epoch": 3, "running": ["t1"]},
    "member.leave": {"member": "n2"},
    "task.assign": ENVELOPE,
    "task.progress": {"task_id": "t1", "idempotency_key": "t1:attempt-2", "attempt": 2},
    "task.result": RESULT,
    "task.cancel": {"task_id": "t1", "reason": "plan changed"},
    "escalation.ask": {"task_id": "t1", "question": "Which region?"},
    "escalation.answer": {"task_id": "t1", "answer": "eu-west"},
    "plan.update": {"revision": 2, "tasks": [{"id": "t1", "goal": "Say hello"}]},
}
UNSAFE_IDS = [
    pytest.param("../x", id="dotdot"),
    pytest.param("/abs", id="absolute"),
    pytest.param("a/b", id="slash"),
    pytest.param("", id="empty"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("x" * 129, id="129-chars"),
    pytest.param(".hidden", id="leading-dot"),
    pytest.param("a b", id="space"),
    pytest.param("a..b", id="inner-dotdot"),
]
BAD_TEAMS = [
    pytest.param("", id="empty"),
    pytest.param("/acme", id="leading-slash"),
    pytest.param("acme/", id="trailing-slash"),
    pytest.param("acme//x", id="empty-segment"),
    pytest.param("acme/../x", id="dotdot"),
    pytest.param(".acme", id="leading-dot"),
    pytest.param("acme/a b", id="space"),
    pytest.param("/".join("a" * 9), id="nine-levels"),
    pytest.param("a" * 257, id="too-long"),
    pytest.param("acme\x00", id="nul"),
]


def message(kind: str = "task.assign", **header: Any) -> dict[str, Any]:
    """A valid message of ``kind`` as a dict; keyword arguments replace header fields."""
    data: dict[str, Any] = {
        "v": 1,
        "id": new_id(),
        "type": kind,
        "team": "acme/research",
        "from": "leader-1",
        "to": "worker-1",
        "epoch": EPOCH,
        "ts": "2025-01-02T03:04:05Z",
        "body": copy.deepcopy(BODIES[kind]),
    }
    data.update(header)
    return data


def with_body(kind: str, **fields: Any) -> dict[str, Any]:
    data = message(kind)
    data["body"].update(fields)
    return data


def refused(data: Any, field: str) -> ProtocolError:
    """Assert that parsing ``data`` raises a ProtocolError naming exactly ``field``."""
    with pytest.raises(ProtocolError) as caught:
        parse_message(data)
    assert caught.value.field == field, str(caught.value)
    assert str(caught.value).startswith(f"{field}: ")
    return caught.value


# --- the baseline is valid ------------------------------------------------------------


@pytest.mark.parametrize("kind", MESSAGE_TYPES)
def test_the_baseline_messages_are_valid(kind: str) -> None:
    parsed = parse_message(json.dumps(message(kind)))
    assert parsed.type == kind


# --- not a message at all -------------------------------------------------------------


def test_malformed_json_names_the_line() -> None:
    text = '{\n  "v": 1,\n  "type": "task.assign",\n  oops\n}'
    error = refused(text, "line 4")
    assert "valid JSON" in error.expected


def test_malformed_json_in_bytes_names_the_line() -> None:
    refused(b'{"v": 1,\n\n "type": }', "line 3")


def test_bytes_that_are_not_utf8_are_refused() -> None:
    refused(b'{"type": "\xff\xfe"}', "(bytes)")


def test_empty_text_is_refused() -> None:
    refused("", "line 1")


@pytest.mark.parametrize("text", ["[1, 2]", "3", '"task.assign"', "null", "true"])
def test_a_json_value_that_is_not_an_object_is_refused(text: str) -> None:
    refused(text, "(message)")


def test_a_python_list_is_refused_like_a_json_list() -> None:
    refused([message()], "(message)")  # type: ignore[arg-type]


def test_source_is_named_before_the_field() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_message("[]", source="inbox/42.json")
    assert caught.value.source == "inbox/42.json"
    assert str(caught.value) == "inbox/42.json: (message): a JSON object"


# --- the header -------------------------------------------------------------------------


def test_unknown_type_names_type_and_lists_the_known_ones() -> None:
    error = refused(message(type="task.teleport"), "type")
    assert "task.teleport" in error.expected
    assert "task.assign" in error.expected


def test_missing_type_names_type() -> None:
    data = message()
    del data["type"]
    refused(data, "type")


@pytest.mark.parametrize("value", [["task.assign"], {"a": 1}, 3, None])
def test_a_type_that_is_not_a_string_names_type(value: Any) -> None:
    refused(message(type=value), "type")


def test_wrong_protocol_version_names_v() -> None:
    refused(message(v=2), "v")


def test_wrong_header_field_type_names_the_field() -> None:
    error = refused(message(epoch="seven"), "epoch")
    assert "integer" in error.expected


def test_wrong_sender_type_names_from_by_its_wire_name() -> None:
    refused(message(**{"from": 42}), "from")


def test_empty_recipient_names_to() -> None:
    refused(message(to=""), "to")


def test_bad_timestamp_names_ts() -> None:
    refused(message(ts="yesterday"), "ts")


def test_missing_body_names_body() -> None:
    data = message()
    del data["body"]
    refused(data, "body")


def test_body_that_is_not_an_object_names_body() -> None:
    refused(message(body="do the thing"), "body")


def test_unknown_header_field_is_refused() -> None:
    error = refused(message(colour="blue"), "colour")
    assert "unknown fields are refused" in error.expected


def test_unknown_body_field_is_refused() -> None:
    refused(with_body("task.assign", colour="blue"), "body.colour")


def test_unknown_field_inside_a_check_is_refused() -> None:
    refused(
        with_body("task.assign", checks=[{"kind": "command", "run": "true", "colour": 1}]),
        "body.checks[0].colour",
    )


def test_wrong_body_field_type_names_the_field() -> None:
    refused(with_body("task.assign", attempt="two"), "body.attempt")


# --- ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("not-a-ulid", id="word"),
        pytest.param("01ARZ3NDEKTSV4RRFFQ69G5FA", id="25-chars"),
        pytest.param("01ARZ3NDEKTSV4RRFFQ69G5FAVX", id="27-chars"),
        pytest.param("8ZZZZZZZZZZZZZZZZZZZZZZZZZ", id="overflow"),
        pytest.param("01ARZ3NDEKTSV4RRFFQ69G5FAU", id="bad-letter-U"),
        pytest.param("", id="empty"),
    ],
)
def test_invalid_ulid_names_id(value: str) -> None:
    refused(message(id=value), "id")


def test_non_string_id_names_id() -> None:
    refused(message(id=12345), "id")


@pytest.mark.parametrize("team", BAD_TEAMS)
def test_bad_team_path_names_team(team: str) -> None:
    refused(message(team=team), "team")


def test_nested_team_path_is_accepted() -> None:
    assert parse_message(message(team="org/research/pricing")).team == "org/research/pricing"


@pytest.mark.parametrize("task_id", UNSAFE_IDS)
def test_unsafe_task_id_in_an_envelope_names_task_id(task_id: str) -> None:
    data = with_body("task.assign", task_id=task_id, idempotency_key=f"{task_id}:attempt-2")
    refused(data, "body.task_id")
    with pytest.raises(ProtocolError) as caught:
        parse_envelope(data["body"])
    assert caught.value.field == "task_id"


@pytest.mark.parametrize("task_id", UNSAFE_IDS)
def test_unsafe_task_id_in_a_result_names_task_id(task_id: str) -> None:
    data = with_body("task.result", task_id=task_id, idempotency_key=f"{task_id}:attempt-2")
    refused(data, "body.task_id")
    with pytest.raises(ProtocolError) as caught:
        parse_result(data["body"])
    assert caught.value.field == "task_id"


@pytest.mark.parametrize("task_id", UNSAFE_IDS)
@pytest.mark.parametrize("kind", ["task.progress", "task.cancel", "escalation.ask"])
def test_unsafe_task_id_in_other_task_messages_names_task_id(kind: str, task_id: str) -> None:
    data = with_body(kind, task_id=task_id)
    if kind == "task.progress":
        data["body"]["idempotency_key"] = f"{task_id}:attempt-2"
    refused(data, "body.task_id")


@pytest.mark.parametrize("task_id", UNSAFE_IDS)
def test_unsafe_task_id_in_a_plan_names_the_task(task_id: str) -> None:
    plan = {"tasks": [{"id": "ok", "goal": "g"}, {"id": task_id, "goal": "g"}]}
    with pytest.raises(ProtocolError) as caught:
        parse_plan(json.dumps(plan))
    assert caught.value.field == "tasks[1].id"
    refused(with_body("plan.update", tasks=plan["tasks"]), "body.tasks[1].id")


@pytest.mark.parametrize("deadline", ["86401", "1e300", "Infinity"])
def test_a_plan_deadline_past_a_day_names_the_task(deadline: str) -> None:
    """A queue run's claim stays invisible for the longest deadline: a day at most."""
    text = '{"tasks": [{"id": "t1", "goal": "g", "deadline_seconds": %s}]}'
    with pytest.raises(ProtocolError) as caught:
        parse_plan(text % deadline)
    assert caught.value.field == "tasks[0].deadline_seconds"
    assert parse_plan(text % "86400").tasks[0].deadline_seconds == 86_400


def test_non_string_task_id_names_task_id() -> None:
    refused(with_body("task.cancel", task_id=7), "body.task_id")


# --- trace context ----------------------------------------------------------------------

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_an_envelope_may_carry_a_w3c_traceparent() -> None:
    parsed = parse_message(with_body("task.assign", traceparent=TRACEPARENT))
    assert parsed.body.traceparent == TRACEPARENT  # type: ignore[union-attr]
    assert parse_message(message("task.assign")).body.traceparent is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("hello", id="not-one"),
        pytest.param(TRACEPARENT.upper(), id="uppercase"),
        pytest.param("01" + TRACEPARENT[2:], id="other-version"),
        pytest.param(TRACEPARENT + "-extra", id="trailing-field"),
        pytest.param(f"00-{'0' * 32}-00f067aa0ba902b7-01", id="zero-trace-id"),
        pytest.param(f"00-4bf92f3577b34da6a3ce929d0e0e4736-{'0' * 16}-01", id="zero-span-id"),
        pytest.param(" " + TRACEPARENT, id="padded"),
        pytest.param("\x1b[31m" + "0" * 2000, id="long-with-escape"),
    ],
)
def test_a_traceparent_that_is_not_w3c_names_the_field(value: str) -> None:
    error = refused(with_body("task.assign", traceparent=value), "body.traceparent")
    assert "W3C traceparent" in error.expected
    assert len(str(error)) < 300  # the value shown is cut


def test_a_traceparent_that_is_not_a_string_names_the_field() -> None:
    refused(with_body("task.assign", traceparent=7), "body.traceparent")


# --- epochs -----------------------------------------------------------------------------


def test_fenced_types_are_every_type_but_membership() -> None:
    assert set(FENCED_TYPES) == {t for t in MESSAGE_TYPES if not t.startswith("member.")}


@pytest.mark.parametrize("kind", sorted(FENCED_TYPES))
def test_missing_epoch_on_a_state_changing_type_names_epoch(kind: str) -> None:
    data = message(kind)
    del data["epoch"]
    error = refused(data, "epoch")
    assert "required" in error.expected.lower()
    assert "more error" not in error.expected  # the only thing wrong


@pytest.mark.parametrize("kind", sorted(FENCED_TYPES))
def test_null_epoch_on_a_state_changing_type_names_epoch(kind: str) -> None:
    refused(message(kind, epoch=None), "epoch")


@pytest.mark.parametrize("kind", sorted(set(MESSAGE_TYPES) - FENCED_TYPES))
def test_epoch_is_optional_on_membership_types(kind: str) -> None:
    data = message(kind)
    del data["epoch"]
    assert parse_message(data).epoch is None
    assert parse_message(message(kind, epoch=None)).epoch is None
    assert parse_message(message(kind, epoch=4)).epoch == 4


@pytest.mark.parametrize("kind", MESSAGE_TYPES)
def test_negative_epoch_names_epoch(kind: str) -> None:
    refused(message(kind, epoch=-1), "epoch")


def test_envelope_epoch_zero_names_body_epoch() -> None:
    refused(message("task.assign", epoch=0) | {"body": ENVELOPE | {"epoch": 0}}, "body.epoch")


@pytest.mark.parametrize("kind", ["task.assign", "task.result"])
def test_body_epoch_must_equal_header_epoch(kind: str) -> None:
    error = refused(message(kind, epoch=EPOCH + 1), "body.epoch")
    assert str(EPOCH + 1) in error.expected


def test_negative_highest_epoch_in_a_join_names_it() -> None:
    refused(with_body("member.join", highest_epoch=-1), "body.highest_epoch")


# --- leases -----------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [0, -1, -0.5])
@pytest.mark.parametrize("kind", ["leadership.claim", "leadership.heartbeat"])
def test_zero_or_negative_ttl_names_ttl_seconds(kind: str, ttl: float) -> None:
    refused(with_body(kind, ttl_seconds=ttl), "body.ttl_seconds")


@pytest.mark.parametrize("ttl", [float("inf"), float("nan")])
@pytest.mark.parametrize("kind", ["leadership.claim", "leadership.heartbeat"])
def test_infinite_or_nan_ttl_names_ttl_seconds(kind: str, ttl: float) -> None:
    """An infinite lease would never expire; JSON text can say 1e999 or Infinity."""
    refused(with_body(kind, ttl_seconds=ttl), "body.ttl_seconds")
    text = json.dumps(with_body(kind, ttl_seconds=1)).replace(
        '"ttl_seconds": 1', '"ttl_seconds": 1e999'
    )
    refused(text, "body.ttl_seconds")


def test_empty_holder_names_holder() -> None:
    refused(with_body("leadership.claim", holder=""), "body.holder")


# --- size limits ----------------------------------------------------------------------


def padded_assign(body_bytes: int, char: str = "a") -> dict[str, Any]:
    """A task.assign whose body is exactly ``body_bytes`` long as compact UTF-8 JSON."""
    data = with_body("task.assign", input={"pad": ""})
    base = body_size(data["body"])
    width = len(char.encode("utf-8"))
    assert (body_bytes - base) % width == 0
    data["body"]["input"]["pad"] = char * ((body_bytes - base) // width)
    assert body_size(data["body"]) == body_bytes
    return data


def test_a_body_of_exactly_256_kib_is_accepted() -> None:
    assert MAX_BODY_BYTES == 256 * 1024
    assert parse_message(padded_assign(MAX_BODY_BYTES)).type == "task.assign"
    assert parse_message(json.dumps(padded_assign(MAX_BODY_BYTES))).type == "task.assign"


def test_a_body_over_256_kib_names_body() -> None:
    error = refused(padded_assign(MAX_BODY_BYTES + 1), "body")
    assert f"the limit is {MAX_BODY_BYTES:,}" in error.expected
    refused(json.dumps(padded_assign(MAX_BODY_BYTES + 1)), "body")


def test_body_size_counts_utf8_bytes_not_characters() -> None:
    data = padded_assign(MAX_BODY_BYTES + 2 - (MAX_BODY_BYTES % 2), char="é")
    assert len(json.dumps(data["body"], ensure_ascii=False)) < MAX_BODY_BYTES
    refused(data, "body")


def test_a_message_over_the_byte_limit_names_the_message() -> None:
    text = json.dumps(message()) + " " * MAX_MESSAGE_BYTES
    error = refused(text, "(message)")
    assert f"the limit is {MAX_MESSAGE_BYTES:,}" in error.expected
    refused(text.encode("utf-8"), "(message)")


def test_message_limit_counts_utf8_bytes_of_text() -> None:
    text = json.dumps(message(), ensure_ascii=False) + "\u3000" * (MAX_MESSAGE_BYTES // 3)
    assert len(text) < MAX_MESSAGE_BYTES < len(text.encode("utf-8"))
    refused(text, "(message)")


# --- envelopes, results, checks ---------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("t1:attempt-1", id="other-attempt"),
        pytest.param("t2:attempt-2", id="other-task"),
        pytest.param("t1-attempt-2", id="wrong-separator"),
        pytest.param("t1:attempt-02", id="padded"),
        pytest.param("", id="empty"),
    ],
)
def test_envelope_idempotency_key_must_match_task_and_attempt(key: str) -> None:
    error = refused(with_body("task.assign", idempotency_key=key), "body.idempotency_key")
    assert "t1:attempt-2" in error.expected
    with pytest.raises(ProtocolError) as caught:
        parse_envelope(ENVELOPE | {"idempotency_key": key})
    assert caught.value.field == "idempotency_key"


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("t2:attempt-2", id="other-task"),
        pytest.param("t1:attempt-0", id="attempt-zero"),
        pytest.param("t1:attempt-", id="no-number"),
        pytest.param("t1:attempt-x", id="not-a-number"),
        pytest.param("t1", id="bare-task-id"),
        pytest.param("t1:attempt-2:again", id="suffix"),
    ],
)
def test_result_idempotency_key_must_be_task_id_attempt_n(key: str) -> None:
    refused(with_body("task.result", idempotency_key=key), "body.idempotency_key")
    with pytest.raises(ProtocolError) as caught:
        parse_result(RESULT | {"idempotency_key": key})
    assert caught.value.field == "idempotency_key"


def test_progress_idempotency_key_must_match_its_attempt() -> None:
    refused(with_body("task.progress", attempt=3), "body.idempotency_key")


def test_blocked_result_without_a_question_names_question() -> None:
    refused(with_body("task.result", status="blocked"), "body.question")
    refused(with_body("task.result", status="blocked", question=""), "body.question")
    with pytest.raises(ProtocolError) as caught:
        parse_result(RESULT | {"status": "blocked"})
    assert caught.value.field == "question"
    ok = parse_message(with_body("task.result", status="blocked", question="Which region?"))
    assert ok.type == "task.result"


def test_unknown_result_status_names_status() -> None:
    refused(with_body("task.result", status="done"), "body.status")


def test_confidence_above_one_names_confidence() -> None:
    refused(with_body("task.result", confidence=1.5), "body.confidence")


def test_unknown_evidence_kind_names_the_evidence_field() -> None:
    refused(with_body("task.result", evidence=[{"kind": "hearsay"}]), "body.evidence[0].kind")


def test_source_evidence_without_retrieval_time_names_it() -> None:
    refused(
        with_body("task.result", evidence=[{"kind": "source", "source": "https://x"}]),
        "body.evidence[0].retrieved_at",
    )


def test_unknown_check_kind_names_the_checks_field() -> None:
    error = refused(
        with_body("task.assign", checks=[{"kind": "command", "run": "true"}, {"kind": "vibes"}]),
        "body.checks[1].kind",
    )
    assert "vibes" in error.expected


def test_check_without_a_kind_names_the_kind() -> None:
    refused(with_body("task.assign", checks=[{"run": "true"}]), "body.checks[0].kind")


def test_check_that_is_not_an_object_names_the_check() -> None:
    refused(with_body("task.assign", checks=["pytest -q"]), "body.checks[0]")


def test_quorum_with_k_greater_than_n_names_k() -> None:
    error = refused(
        with_body("task.assign", checks=[{"kind": "quorum", "k": 3, "n": 2}]), "body.checks[0].k"
    )
    assert "2" in error.expected


def test_command_check_without_a_command_names_run() -> None:
    refused(with_body("task.assign", checks=[{"kind": "command"}]), "body.checks[0].run")


def test_judge_threshold_above_one_names_it() -> None:
    refused(
        with_body("task.assign", checks=[{"kind": "judge", "pass_threshold": 2}]),
        "body.checks[0].pass_threshold",
    )


def test_unknown_check_kind_in_a_plan_names_the_checks_field() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_plan("tasks:\n  - id: a\n    goal: g\n    checks: [{kind: vibes}]\n")
    assert caught.value.field == "tasks[0].checks[0].kind"


def test_zero_deadline_names_deadline_seconds() -> None:
    refused(with_body("task.assign", deadline_seconds=0), "body.deadline_seconds")


# --- plans ------------------------------------------------------------------------------


def plan_error(text: str, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_plan(text, **kwargs)
    return caught.value


def test_duplicate_task_id_names_the_second_one() -> None:
    error = plan_error("tasks:\n  - {id: a, goal: g}\n  - {id: b, goal: g}\n  - {id: a, goal: g}\n")
    assert error.field == "tasks[2].id"
    assert "tasks[0]" in error.expected


def test_missing_dependency_names_depends_on() -> None:
    error = plan_error("tasks:\n  - {id: a, goal: g}\n  - {id: b, goal: g, depends_on: [a, zz]}\n")
    assert error.field == "tasks[1].depends_on"
    assert "'zz'" in error.expected


def test_dependency_cycle_shows_the_cycle() -> None:
    error = plan_error(
        "tasks:\n"
        "  - {id: a, goal: g, depends_on: [b]}\n"
        "  - {id: b, goal: g, depends_on: [c]}\n"
        "  - {id: c, goal: g, depends_on: [a]}\n"
        "  - {id: d, goal: g}\n"
    )
    assert error.field.endswith("].depends_on")
    assert error.field in ("tasks[0].depends_on", "tasks[1].depends_on", "tasks[2].depends_on")
    cycle = error.expected.split("found ")[1].split(" (")[0].split(" -> ")
    assert cycle[0] == cycle[-1]
    assert sorted(cycle[:-1]) == ["a", "b", "c"]
    depends = {"a": "b", "b": "c", "c": "a"}
    for node, successor in zip(cycle, cycle[1:], strict=False):
        assert depends[node] == successor  # read left to right: "depends on"


def test_self_dependency_names_depends_on() -> None:
    error = plan_error("tasks:\n  - {id: a, goal: g}\n  - {id: b, goal: g, depends_on: [b]}\n")
    assert error.field == "tasks[1].depends_on"
    assert "itself" in error.expected


def test_yaml_syntax_error_names_the_line() -> None:
    error = plan_error("goal: x\ntasks:\n  - id: a\n   goal: b\n")
    assert error.field == "line 4"
    assert "valid YAML" in error.expected


def test_yaml_character_error_names_the_line() -> None:
    error = plan_error("tasks:\n  - id: a\n    goal: 'bell \x07'\n")
    assert error.field == "line 3"


def test_plan_that_is_not_a_mapping_is_refused() -> None:
    assert plan_error("- a\n- b\n").field == "(plan)"
    assert plan_error("").field == "(plan)"


def test_plan_without_tasks_names_tasks() -> None:
    assert plan_error("goal: nothing\n").field == "tasks"
    assert plan_error("tasks: []\n").field == "tasks"


@pytest.mark.parametrize("team", BAD_TEAMS)
def test_plan_with_a_bad_team_names_team(team: str) -> None:
    text = json.dumps({"team": team, "tasks": [{"id": "a", "goal": "g"}]})
    assert plan_error(text).field == "team"


def test_plan_with_an_unknown_field_names_it() -> None:
    assert plan_error("tasks:\n  - {id: a, goal: g, prio: 1}\n").field == "tasks[0].prio"


def test_markdown_plan_without_a_yaml_block_is_refused() -> None:
    error = plan_error("# Plan\n\nJust prose.\n\n```python\nprint(1)\n```\n", markdown=True)
    assert error.field == "(markdown)"
    assert "```yaml" in error.expected


def test_markdown_plan_with_an_unclosed_block_names_its_line() -> None:
    error = plan_error("# Plan\n\n```yaml\ntasks: []\n", markdown=True)
    assert error.field == "line 3"


def test_yaml_error_in_a_markdown_plan_names_the_line_of_the_file() -> None:
    text = "# Plan\n\nProse.\n\n```yaml\ntasks:\n  - id: a\n   goal: b\n```\n"
    assert plan_error(text, markdown=True).field == "line 8"


def test_markdown_plan_file_is_read_from_its_yaml_block(tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    path.write_text("# Plan\n\n```yaml\ntasks:\n  - {id: a, goal: g}\n```\n", encoding="utf-8")
    assert [task.id for task in load_plan(path).tasks] == ["a"]


def test_missing_plan_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProtocolError) as caught:
        load_plan(tmp_path / "nope.yaml")
    assert caught.value.field == "(file)"
    assert caught.value.source == str(tmp_path / "nope.yaml")


def test_directory_as_plan_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProtocolError) as caught:
        load_plan(tmp_path)
    assert caught.value.field == "(file)"


def test_plan_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_bytes(b"tasks:\n  - {id: a, goal: '\xff'}\n")
    with pytest.raises(ProtocolError) as caught:
        load_plan(path)
    assert caught.value.field == "(file)"


def test_json_plan_keeps_json_numbers() -> None:
    """PyYAML (YAML 1.1) would read 1e3 as the string '1e3'; JSON plans are read as JSON."""
    plan = parse_plan(json.dumps({"tasks": [{"id": "a", "goal": "g", "input": {"n": 1e3}}]}))
    assert plan.tasks[0].input == {"n": 1000.0}


# --- nothing but ProtocolError ever escapes ---------------------------------------------

json_like: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from([*MESSAGE_TYPES, "task_id", "epoch", "body", "kind", "quorum"]),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.text(max_size=10) | st.sampled_from(["type", "body", "epoch", "checks", "kind"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


def parses_or_refuses(data: Any) -> None:
    try:
        parse_message(data)
    except ProtocolError as error:
        assert error.field
        assert str(error)


@settings(max_examples=50, deadline=None)
@given(json_like)
def test_arbitrary_json_values_give_a_message_or_a_protocol_error(value: Any) -> None:
    parses_or_refuses(json.dumps(value))
    if isinstance(value, dict):
        parses_or_refuses(value)


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_a_message_or_a_protocol_error(raw: bytes) -> None:
    parses_or_refuses(raw)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_gives_a_message_or_a_protocol_error(text: str) -> None:
    parses_or_refuses(text)


@st.composite
def mutated_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with one field, at any depth, replaced, removed or added."""
    data = message(draw(st.sampled_from(MESSAGE_TYPES)))
    node: Any = data
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, dict | list) and child and draw(st.booleans()):
            node = child
            continue
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            node[key] = draw(json_like)
        elif action == "remove" and isinstance(node, dict):
            del node[key]
        elif isinstance(node, dict):
            node[draw(st.text(max_size=8))] = draw(json_like)
        else:
            node.append(draw(json_like))
        break
    return data


@settings(max_examples=100, deadline=None)
@given(mutated_messages())
def test_mutated_messages_give_a_message_or_a_protocol_error(data: dict[str, Any]) -> None:
    parses_or_refuses(data)
    parses_or_refuses(json.dumps(data))


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_plan_text_gives_a_plan_or_a_protocol_error(text: str) -> None:
    for markdown in (False, True):
        try:
            parse_plan(text, markdown=markdown)
        except ProtocolError as error:
            assert error.field


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deeply_nested_json_is_refused_not_crashed(depth: int) -> None:
    refused("[" * depth + "]" * depth, "(message)")
    body = "[" * depth + "]" * depth
    text = json.dumps(message()).replace('"Say hello"', body, 1)
    with pytest.raises(ProtocolError):
        parse_message(text)


def test_deeply_nested_yaml_is_refused_not_crashed() -> None:
    with pytest.raises(ProtocolError):
        parse_plan("[" * 1_000)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"$schema": [1]}, id="schema-uri-list"),
        pytest.param({"$schema": 5}, id="schema-uri-int"),
        pytest.param({"$schema": "https://example.com/unknown"}, id="schema-uri-unknown"),
        pytest.param({"type": 5}, id="type-int"),
        pytest.param({"type": "colour"}, id="type-unknown"),
        pytest.param({"pattern": "("}, id="bad-regex"),
        pytest.param({"$ref": "#/nope"}, id="dangling-ref"),
        pytest.param({"properties": []}, id="properties-list"),
    ],
)
def test_an_odd_json_schema_in_a_check_never_crashes_the_parser(schema: dict[str, Any]) -> None:
    for key in ("checks", "output_schema"):
        value: Any = [{"kind": "schema", "schema": schema}] if key == "checks" else schema
        parses_or_refuses(with_body("task.assign", **{key: value}))
        try:
            parse_plan(json.dumps({"tasks": [{"id": "a", "goal": "g", key: value}]}))
        except ProtocolError as error:
            assert error.field.startswith("tasks[0].")


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "(?P<a>x)(?P<a>y)"])
def test_an_invalid_expect_output_regex_never_crashes_the_parser(pattern: str) -> None:
    parses_or_refuses(
        with_body(
            "task.assign", checks=[{"kind": "command", "run": "true", "expect_output": pattern}]
        )
    )
