"""Counts as people say them: ``1 attempt``, ``2 attempts``, never ``1 attempts``.

A reason or a line with a number in it is read by a person (in ``tenure inbox``, a
run report, a log), and a plural after a 1 reads as a bug in what it reports.
"""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, its plural (``noun + "s"`` unless given) unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
