"""Text on a run report's page: everything dynamic goes through :func:`text`.

A task reason, a member id, an answer: any of it may be what a model wrote, so it is
redacted and its control characters made visible (``console.safe.plain``) and then
HTML-escaped, quotes included, so it is text in an element or an attribute and
never markup (a ``<script>`` in a reason shows as those characters).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime

from tenure.console.safe import plain
from tenure.protocol.clip import clip

STATE_COLOURS = {
    "done": "#2e9e5b",
    "running": "#e0a030",
    "review": "#2a9db5",
    "queued": "#7a8290",
    "blocked": "#d9534f",
    "failed": "#b52b27",
    "cancelled": "#aab0b8",
}


def text(value: object) -> str:
    """``value`` safe to put in HTML: redacted, controls shown, escaped."""
    return html.escape(plain(value), quote=True)


def short(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters at a word boundary, an ellipsis saying it
    was (``protocol.clip``); a word longer than that (an id) is cut inside."""
    return clip(value, limit) if limit > 0 else ""


def clock(at: float | None) -> str:
    """A store time as UTC hours, minutes, seconds and milliseconds."""
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S.%f")[:-3]


def moment(at: float) -> str:
    """A store time as a UTC date and time."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(value: float) -> str:
    """A duration, short: 0.42s, 12s, 3.5m, 1.2h."""
    value = max(0.0, value)
    if value < 10:
        return f"{value:.2f}s"
    if value < 90:
        return f"{value:.0f}s"
    if value < 5400:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"
