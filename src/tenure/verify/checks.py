"""Machine-run checks: the verifier's own look at an artifact, never the worker's word."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenure.executors.environment import child_env
from tenure.executors.process_group import forget_child, start_child
from tenure.protocol import (
    CommandCheck,
    CommandEvidence,
    EvidenceCheck,
    SchemaCheck,
    SourceEvidence,
    TaskResult,
)

OUTPUT_LIMIT = 4000
CLOCK_SKEW_SECONDS = 300.0
"""How far a source's ``retrieved_at`` (or an answer's grounding time) may lie in the
verifier's future: members' clocks differ a little. Beyond it the time is refused,
not taken as the freshest there is."""


@dataclass(frozen=True)
class Verdict:
    """One check's outcome and what it saw; a failed verdict's reason feeds the next attempt."""

    check: str
    passed: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def check_schema(check: SchemaCheck, result: TaskResult) -> Verdict:
    import jsonschema  # on the first schema check: a member that runs none never loads it
    from jsonschema.exceptions import SchemaError, ValidationError
    from referencing.exceptions import Unresolvable

    try:
        validator_cls = jsonschema.validators.validator_for(
            check.json_schema, default=jsonschema.validators.Draft202012Validator
        )
        validator_cls.check_schema(check.json_schema)
        errors = sorted(validator_cls(check.json_schema).iter_errors(result.artifact), key=str)
    except SchemaError as exc:
        return Verdict("schema", False, f"the check's schema is itself invalid: {exc.message}")
    except (Unresolvable, TypeError) as exc:  # a dangling $ref, a $schema that is no URI
        return Verdict("schema", False, f"the check's schema is itself invalid: {exc}")
    if not errors:
        return Verdict("schema", True, "artifact matches the schema")
    first: ValidationError = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(artifact)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return Verdict("schema", False, f"artifact {where}: {first.message}{more}")


def check_evidence(
    check: EvidenceCheck, result: TaskResult, now: datetime | None = None
) -> Verdict:
    """Every known value has a fresh source; unknowns are null; claimed runs are shown.

    A source dated more than ``CLOCK_SKEW_SECONDS`` after ``now`` is refused, whatever
    ``max_age_seconds`` says: a time in the future is no proof of freshness."""
    now = now or datetime.now(UTC)
    artifact = result.artifact
    if not isinstance(artifact, dict):
        return Verdict("evidence", False, "artifact must be a JSON object to check its sources")
    sources = {e.field: e for e in result.evidence if isinstance(e, SourceEvidence)}
    any_source = [e for e in result.evidence if isinstance(e, SourceEvidence) and e.field is None]
    problems: list[str] = []
    for name in check.fields or list(artifact):
        value = _lookup(artifact, name)
        if value is None:
            continue  # unknown values must be null, and null needs no source
        source = sources.get(name) or (any_source[0] if any_source else None)
        if source is None:
            problems.append(f"{name}={value!r} has no source")
            continue
        retrieved = source.retrieved_at
        if retrieved.tzinfo is None:
            retrieved = retrieved.replace(tzinfo=UTC)
        age = (now - retrieved).total_seconds()
        if -age > CLOCK_SKEW_SECONDS:
            problems.append(
                f"{name} source is dated {-age:.0f}s in the future "
                f"({retrieved.isoformat()}; clock skew allowed: {CLOCK_SKEW_SECONDS:g}s)"
            )
        elif check.max_age_seconds is not None and age > check.max_age_seconds:
            problems.append(f"{name} source is {age:.0f}s old (limit {check.max_age_seconds:g}s)")
    ran = [e for e in result.evidence if isinstance(e, CommandEvidence)]
    if result.notes.verified and not ran:
        problems.append("notes claim verification but no command evidence shows it was run")
    if problems:
        return Verdict("evidence", False, "; ".join(problems[:5]), {"problems": problems})
    return Verdict("evidence", True, "every known value has a fresh source")


def check_command(check: CommandCheck, workdir: Path | None) -> Verdict:
    """Run the check's command ourselves, with a timeout, in the task's directory, with
    the allowlisted environment (no model keys, no store URL: ``executors.environment``).

    On timeout the command's whole process group is killed, not just its shell."""
    try:
        proc = start_child(  # in its own session, dying with this member
            check.run,
            shell=True,
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            env=child_env(),
        )
    except OSError as exc:
        return Verdict("command", False, f"`{check.run}` could not start: {exc.strerror}")
    with proc:
        try:
            stdout, stderr = proc.communicate(timeout=check.timeout_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Verdict(
                "command", False, f"`{check.run}` timed out after {check.timeout_seconds:g}s"
            )
        finally:
            forget_child(proc)
    output = (stdout + stderr)[-OUTPUT_LIMIT:]
    seen = {"command": check.run, "exit_code": proc.returncode, "output": output}
    if proc.returncode != check.expect_exit:
        reason = f"`{check.run}` exited {proc.returncode}, expected {check.expect_exit}"
        if proc.returncode == 127:
            reason += " (command not found)"
        return Verdict("command", False, f"{reason}\n{output}".rstrip(), seen)
    try:
        matched = not check.expect_output or re.search(check.expect_output, output)
    except re.error as exc:
        reason = f"expect_output {check.expect_output!r} is not a valid regex: {exc}"
        return Verdict("command", False, reason, seen)
    if not matched:
        reason = f"`{check.run}` output does not match {check.expect_output!r}"
        return Verdict("command", False, reason, seen)
    return Verdict("command", True, f"`{check.run}` exited {proc.returncode} as expected", seen)


def _lookup(obj: dict[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value
