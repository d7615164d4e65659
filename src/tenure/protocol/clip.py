"""Shortening text for a reason, a table cell or a log line: never mid-word.

A reason cut at a fixed width ("the check fai") reads as a different word, or as
none; :func:`clip` cuts at the last word boundary that fits and says it cut with an
ellipsis. Only a first word longer than the whole width (a URL, a hash) is cut
inside it, there being no boundary to cut at, still with the ellipsis.
"""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start cut at a word
    boundary, trailing punctuation dropped, ending in an ellipsis (``limit`` at most)."""
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return text[:limit]
    room = limit - len(ELLIPSIS)
    head = text[: room + 1]  # one more: is the character after the cut a space?
    if head[-1].isspace():
        cut = head[:-1].rstrip()
    else:
        boundary = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        cut = head[:boundary].rstrip() if boundary > 0 else head[:room]
    return cut.rstrip(" ,;:-—") + ELLIPSIS


def first_line(text: str, limit: int = 200, *, empty: str = "failed") -> str:
    """The first non-blank line of ``text`` (``empty`` if none), clipped to ``limit``."""
    stripped = text.strip()
    return clip(stripped.splitlines()[0] if stripped else empty, limit)
