"""Identifiers: ULID message ids, and task ids / team paths that are safe as file names."""

from __future__ import annotations

import re

from ulid import ULID

from tenure.protocol.errors import ProtocolError

MAX_ID_LENGTH = 128
MAX_TEAM_DEPTH = 8
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def new_id() -> str:
    """A new ULID: sortable by creation time, unique without coordination."""
    return str(ULID())


def check_ulid(value: str, field: str = "id") -> str:
    try:
        ULID.from_str(value)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(field, f"a 26-character ULID, got {value!r}") from exc
    return value


def check_task_id(value: object, field: str = "task_id") -> str:
    """Refuse ids that would be unsafe later as a file or branch name."""
    if not isinstance(value, str):
        raise ProtocolError(field, f"a string, got {type(value).__name__}")
    problem = _segment_problem(value)
    if problem:
        raise ProtocolError(field, f"{problem}, got {value[:40]!r}")
    return value


def check_team(value: object, field: str = "team") -> str:
    """A team path such as ``acme/research/pricing``: safe segments joined by '/'.

    One check for every place a team is named (plans, messages, the command line,
    the members' files): a path is relative, has no empty or '..' segment, and each
    segment is a safe file name, so ``members/<team>/`` stays inside its directory."""
    if not isinstance(value, str):
        raise ProtocolError(field, f"a string, got {type(value).__name__}")
    shown = value[:60]
    if not value:
        raise ProtocolError(field, f"a team path like acme or acme/research, got {shown!r}")
    if len(value) > MAX_ID_LENGTH * 2:
        raise ProtocolError(field, f"at most {MAX_ID_LENGTH * 2} characters, got {len(value)}")
    if value.startswith("/"):
        raise ProtocolError(field, f"a relative team path (no leading '/'), got {shown!r}")
    segments = value.split("/")
    if len(segments) > MAX_TEAM_DEPTH:
        raise ProtocolError(field, f"at most {MAX_TEAM_DEPTH} levels, got {len(segments)}")
    if "" in segments:
        raise ProtocolError(field, f"no empty segment ('//' or a trailing '/'), got {shown!r}")
    for segment in segments:
        problem = _segment_problem(segment)
        if problem:
            raise ProtocolError(field, f"each part between '/': {problem}, got {shown!r}")
    return value


def _segment_problem(value: str) -> str | None:
    if not value:
        return "a non-empty id"
    if len(value) > MAX_ID_LENGTH:
        return f"at most {MAX_ID_LENGTH} characters"
    if "\x00" in value:
        return "no NUL character"
    if ".." in value:
        return "no '..'"
    if not _SEGMENT.fullmatch(value):
        return "letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None
