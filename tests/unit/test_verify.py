"""The verification ladder: the verifier's own look at a result, never the worker's word."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tenure.protocol import (
    CommandCheck,
    EvidenceCheck,
    JudgeCheck,
    ProtocolError,
    QuorumCheck,
    SchemaCheck,
    TaskResult,
    parse_plan,
)
from tenure.verify import check_command, check_evidence, check_schema, checks_for, verify
from tenure.verify.checks import CLOCK_SKEW_SECONDS

PRICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "price": {"type": "number"},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku"]}},
    },
    "required": ["price"],
}


def result(artifact: Any = None, **fields: Any) -> TaskResult:
    return TaskResult.model_validate(
        {
            "task_id": "t1",
            "idempotency_key": "t1:attempt-1",
            "epoch": 1,
            "status": "completed",
            "artifact": artifact,
            **fields,
        }
    )


def schema_check(schema: dict[str, Any]) -> SchemaCheck:
    """Built without the load-time validation, as if it came from an older plan or
    a peer: the verifier must still never pass it silently."""
    return SchemaCheck.model_construct(kind="schema", json_schema=schema)


def source(age_seconds: float, field: str | None = None) -> dict[str, Any]:
    at = datetime.now(UTC) - timedelta(seconds=age_seconds)
    return {
        "kind": "source",
        "source": "https://vendor.example/prices",
        "retrieved_at": at.isoformat(),
        "field": field,
    }


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- schema ---------------------------------------------------------------------------


def test_schema_check_passes_a_matching_artifact() -> None:
    verdict = check_schema(schema_check(PRICE_SCHEMA), result({"price": 9.5}))
    assert verdict.passed
    assert verdict.check == "schema"


def test_schema_check_fails_naming_the_artifact_path() -> None:
    verdict = check_schema(schema_check(PRICE_SCHEMA), result({"price": "cheap"}))
    assert not verdict.passed
    assert verdict.reason.startswith("artifact price:")
    assert "'cheap' is not of type 'number'" in verdict.reason


def test_schema_check_names_a_nested_path_and_counts_the_rest() -> None:
    artifact = {"price": "x", "items": [{"sku": "a"}, {"name": "no sku"}]}
    verdict = check_schema(schema_check(PRICE_SCHEMA), result(artifact))
    assert not verdict.passed
    assert "(and 1 more)" in verdict.reason
    nested = check_schema(schema_check(PRICE_SCHEMA), result({"price": 1, "items": [{}]}))
    assert not nested.passed
    assert nested.reason.startswith("artifact items/0:")


def test_schema_check_on_a_missing_artifact_names_the_artifact() -> None:
    verdict = check_schema(schema_check(PRICE_SCHEMA), result(None))
    assert not verdict.passed
    assert verdict.reason.startswith("artifact (artifact):")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 12},
        {"type": "nonsense"},
        {"properties": {"price": {"pattern": "(["}}},
        {"$ref": "#/definitions/missing"},
        {"$ref": "https://schemas.invalid/price.json"},
        {"$schema": ["not", "a", "uri"]},
    ],
    ids=["type-int", "type-unknown", "bad-regex", "dangling-ref", "remote-ref", "schema-list"],
)
def test_invalid_schema_is_a_failed_verdict_with_a_reason(schema: dict[str, Any]) -> None:
    verdict = check_schema(schema_check(schema), result({"price": 1}))
    assert not verdict.passed
    assert "schema" in verdict.reason
    assert "invalid" in verdict.reason


def test_invalid_output_schema_through_the_ladder_never_passes_silently() -> None:
    verdicts = verify([], result({"price": 1}), output_schema={"$ref": "#/nowhere"})
    assert [v.check for v in verdicts] == ["schema"]
    assert not verdicts[0].passed


def test_unknown_metaschema_still_validates() -> None:
    schema = {"$schema": "https://example.invalid/draft-99", **PRICE_SCHEMA}
    assert check_schema(schema_check(schema), result({"price": 2})).passed
    assert not check_schema(schema_check(schema), result({"price": "2"})).passed


# --- evidence -------------------------------------------------------------------------


def test_evidence_check_refuses_a_value_without_source() -> None:
    verdict = check_evidence(EvidenceCheck(), result({"price": 10}))
    assert not verdict.passed
    assert "price=10 has no source" in verdict.reason


def test_evidence_check_accepts_fresh_sources() -> None:
    checked = result({"price": 10, "currency": "EUR"}, evidence=[source(5)])
    assert check_evidence(EvidenceCheck(max_age_seconds=60), checked).passed


def test_evidence_check_refuses_a_stale_source_beyond_max_age() -> None:
    checked = result(
        {"price": 10, "currency": "EUR"},
        evidence=[source(7200, field="price"), source(1, field="currency")],
    )
    verdict = check_evidence(EvidenceCheck(max_age_seconds=60), checked)
    assert not verdict.passed
    assert "price source is 7200s old (limit 60s)" in verdict.reason
    assert "currency" not in verdict.reason


def test_evidence_check_refuses_a_source_dated_in_the_future() -> None:
    tomorrow = result({"price": 10}, evidence=[source(-86_400, field="price")])
    for check in (EvidenceCheck(max_age_seconds=3600), EvidenceCheck()):
        verdict = check_evidence(check, tomorrow)
        assert not verdict.passed
        assert "price source is dated 86400s in the future" in verdict.reason
        assert f"clock skew allowed: {CLOCK_SKEW_SECONDS:g}s" in verdict.reason


def test_evidence_check_allows_a_little_clock_skew() -> None:
    skewed = result({"price": 10}, evidence=[source(-(CLOCK_SKEW_SECONDS - 30), field="price")])
    assert check_evidence(EvidenceCheck(max_age_seconds=60), skewed).passed
    beyond = result({"price": 10}, evidence=[source(-(CLOCK_SKEW_SECONDS + 30), field="price")])
    assert not check_evidence(EvidenceCheck(max_age_seconds=60), beyond).passed


def test_evidence_check_accepts_null_unknowns_without_source() -> None:
    checked = result({"price": 10, "discount": None}, evidence=[source(1, field="price")])
    verdict = check_evidence(EvidenceCheck(max_age_seconds=60), checked)
    assert verdict.passed, verdict.reason


def test_evidence_check_refuses_claimed_verification_without_command_evidence() -> None:
    claimed = result({"price": 10}, evidence=[source(1)], notes={"verified": ["ran the tests"]})
    verdict = check_evidence(EvidenceCheck(), claimed)
    assert not verdict.passed
    assert "no command evidence" in verdict.reason
    shown = result(
        {"price": 10},
        evidence=[source(1), {"kind": "command", "command": "pytest", "exit_code": 0}],
        notes={"verified": ["ran the tests"]},
    )
    assert check_evidence(EvidenceCheck(), shown).passed


def test_evidence_check_looks_only_at_listed_fields() -> None:
    checked = result({"price": 10, "guess": 3}, evidence=[source(1, field="price")])
    assert check_evidence(EvidenceCheck(fields=["price"]), checked).passed
    assert not check_evidence(EvidenceCheck(), checked).passed


def test_evidence_check_needs_an_object_artifact() -> None:
    verdict = check_evidence(EvidenceCheck(), result([1, 2]))
    assert not verdict.passed
    assert "JSON object" in verdict.reason


# --- command --------------------------------------------------------------------------


def test_command_check_passes_on_the_expected_exit(tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("x")
    verdict = check_command(CommandCheck(run="test -f marker"), tmp_path)
    assert verdict.passed, verdict.reason
    assert verdict.evidence["exit_code"] == 0
    assert check_command(CommandCheck(run="exit 3", expect_exit=3), tmp_path).passed


def test_command_check_fails_on_a_wrong_exit_with_output(tmp_path: Path) -> None:
    verdict = check_command(CommandCheck(run="echo 2 tests failed; exit 3"), tmp_path)
    assert not verdict.passed
    assert "exited 3, expected 0" in verdict.reason
    assert "2 tests failed" in verdict.reason


def test_command_check_matches_output_against_a_regex(tmp_path: Path) -> None:
    ok = CommandCheck(run="echo '12 passed in 0.3s'", expect_output=r"\d+ passed")
    assert check_command(ok, tmp_path).passed
    bad = CommandCheck(run="echo '12 passed'", expect_output=r"^0 failed")
    verdict = check_command(bad, tmp_path)
    assert not verdict.passed
    assert "does not match '^0 failed'" in verdict.reason


def test_command_check_with_an_invalid_output_regex_fails_with_a_reason(tmp_path: Path) -> None:
    check = CommandCheck.model_construct(
        kind="command", run="echo ok", expect_exit=0, expect_output="([", timeout_seconds=5.0
    )
    verdict = check_command(check, tmp_path)
    assert not verdict.passed
    assert "not a valid regex" in verdict.reason


def test_an_invalid_output_regex_is_refused_when_the_check_is_declared() -> None:
    with pytest.raises(ValidationError, match="valid regular expression"):
        CommandCheck(run="echo ok", expect_output="([")


@pytest.mark.parametrize("schema", [{"type": 12}, {"pattern": "("}, {"$schema": ["a"]}])
def test_an_invalid_schema_is_refused_when_the_plan_loads(schema: dict[str, Any]) -> None:
    plan = {"tasks": [{"id": "t", "goal": "g", "checks": [{"kind": "schema", "schema": schema}]}]}
    with pytest.raises(ProtocolError) as caught:
        parse_plan(json.dumps(plan))
    assert caught.value.field == "tasks[0].checks[0].schema"
    assert "valid JSON Schema" in caught.value.expected


def test_command_check_times_out(tmp_path: Path) -> None:
    started = time.monotonic()
    verdict = check_command(CommandCheck(run="sleep 5", timeout_seconds=0.3), tmp_path)
    assert time.monotonic() - started < 3
    assert not verdict.passed
    assert "timed out after 0.3s" in verdict.reason


def test_command_check_timeout_kills_the_commands_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    run = f"sleep 30 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    verdict = check_command(CommandCheck(run=run, timeout_seconds=0.5), tmp_path)
    assert time.monotonic() - started < 5
    assert not verdict.passed
    child = int(pidfile.read_text())
    for _ in range(100):
        if not alive(child):
            break
        time.sleep(0.02)
    assert not alive(child), "the check's child process outlived its timeout"


def test_command_check_command_not_found(tmp_path: Path) -> None:
    verdict = check_command(CommandCheck(run="tenure-no-such-tool-xyz --all"), tmp_path)
    assert not verdict.passed
    assert "(command not found)" in verdict.reason


def test_command_check_in_a_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    verdict = check_command(CommandCheck(run="true"), tmp_path / "gone")
    assert not verdict.passed
    assert "could not start" in verdict.reason


# --- judge, quorum, self-report and the ladder ----------------------------------------


@pytest.mark.parametrize("check", [JudgeCheck(), QuorumCheck(k=2, n=3)], ids=["judge", "quorum"])
def test_judge_and_quorum_fail_with_a_clear_reason(check: JudgeCheck | QuorumCheck) -> None:
    verdicts = verify([check], result({"price": 1}))
    assert len(verdicts) == 1
    assert verdicts[0].check == check.kind
    assert not verdicts[0].passed
    assert check.kind in verdicts[0].reason
    assert "not" in verdicts[0].reason


def test_a_task_without_checks_is_accepted_only_as_self_report() -> None:
    verdicts = verify([], result({"anything": True}))
    assert len(verdicts) == 1
    assert verdicts[0].check == "self-report"
    assert verdicts[0].passed
    assert "no checks" in verdicts[0].reason


def test_output_schema_adds_a_schema_check_so_it_is_not_self_report() -> None:
    verdicts = verify([], result({"price": 1}), output_schema=PRICE_SCHEMA)
    assert [(v.check, v.passed) for v in verdicts] == [("schema", True)]
    failing = verify([], result({"price": "x"}), output_schema=PRICE_SCHEMA)
    assert [(v.check, v.passed) for v in failing] == [("schema", False)]


def test_ladder_runs_weakest_first_and_stops_at_the_first_failure(tmp_path: Path) -> None:
    checks = [
        CommandCheck(run=f"touch {tmp_path / 'ran'}"),
        EvidenceCheck(),
        schema_check(PRICE_SCHEMA),
    ]
    ordered = checks_for(list(checks), None)
    assert [c.kind for c in ordered] == ["schema", "evidence", "command"]
    verdicts = verify(list(checks), result({"price": 1}), workdir=tmp_path)
    assert [(v.check, v.passed) for v in verdicts] == [("schema", True), ("evidence", False)]
    assert not (tmp_path / "ran").exists(), "a check after the first failure ran"
    sourced = result({"price": 1}, evidence=[source(1)])
    verdicts = verify(list(checks), sourced, workdir=tmp_path)
    assert [(v.check, v.passed) for v in verdicts] == [
        ("schema", True),
        ("evidence", True),
        ("command", True),
    ]
    assert (tmp_path / "ran").exists()


def test_an_explicit_schema_check_is_not_doubled_by_output_schema() -> None:
    ordered = checks_for([schema_check({"type": "object"})], PRICE_SCHEMA)
    assert [c.kind for c in ordered] == ["schema"]
