"""The two pictures of a run report, as inline SVG: the plan's dependency graph and
the timeline of leaders and attempts.

Every label may be a member's text (a task id, a member id): it goes through
``report_text.text`` (secrets redacted, control characters shown, HTML escaped) like
everything else on the page. Each shape carries a ``<title>``, so hovering shows the
whole of what a label had to cut.
"""

from __future__ import annotations

from collections.abc import Callable

from tenure.console.report_text import STATE_COLOURS, clock, seconds, short, text
from tenure.roles.teams.report import AttemptRow, Report, TaskRow

NODE_W, NODE_H, COL_GAP, ROW_GAP, MARGIN = 170, 38, 70, 18, 16
LANE_H, LABEL_W, TIMELINE_W, AXIS_H = 30, 130, 900, 26
OUTCOME_COLOURS = {
    "accepted": "#2e9e5b",
    "retried": "#e0a030",
    "given up": "#9a6fb0",
    "blocked": "#d9534f",
    "failed": "#b52b27",
    "cancelled": "#8a8f98",
    "open": "#4a90d9",
}


def anchor(index: int) -> str:
    """The page anchor of the ``index``-th task (never built from a task id)."""
    return f"task-{index}"


def plan_graph(rows: list[TaskRow]) -> str:
    """Tasks as boxes in columns by dependency depth, an arrow from each dependency."""
    if not rows:
        return '<p class="empty">the register holds no tasks</p>'
    index = {r.task_id: i for i, r in enumerate(rows)}
    columns: dict[int, list[TaskRow]] = {}
    for row in rows:
        columns.setdefault(max(row.depth, 0), []).append(row)
    place: dict[str, tuple[int, int]] = {}
    for depth, column in columns.items():
        for n, row in enumerate(column):
            place[row.task_id] = (
                MARGIN + depth * (NODE_W + COL_GAP),
                MARGIN + n * (NODE_H + ROW_GAP),
            )
    width = MARGIN * 2 + (max(columns) + 1) * (NODE_W + COL_GAP) - COL_GAP
    height = MARGIN * 2 + max(len(c) for c in columns.values()) * (NODE_H + ROW_GAP) - ROW_GAP
    edges = [
        _edge(place[dep], place[row.task_id])
        for row in rows
        for dep in row.task.spec.depends_on
        if dep in place
    ]
    nodes = [_node(row, place[row.task_id], index[row.task_id]) for row in rows]
    return (
        f'<svg class="graph" role="img" aria-label="plan dependency graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#7a8290"/></marker></defs>' + "".join(edges) + "".join(nodes) + "</svg>"
    )


def _edge(start: tuple[int, int], end: tuple[int, int]) -> str:
    x1, y1 = start[0] + NODE_W, start[1] + NODE_H // 2
    x2, y2 = end[0] - 2, end[1] + NODE_H // 2
    mid = (x1 + x2) // 2
    return (
        f'<path class="edge" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" fill="none" '
        'stroke="#7a8290" stroke-width="1.4" marker-end="url(#arrow)"/>'
    )


def _node(row: TaskRow, at: tuple[int, int], index: int) -> str:
    task = row.task
    x, y = at
    colour = STATE_COLOURS.get(task.state, "#8a8f98")
    tip = f"{task.task_id} — {task.state}, attempt {task.attempt}: {task.spec.goal}"
    return (
        f'<a href="#{anchor(index)}"><g class="node" data-task="{text(task.task_id)}">'
        f"<title>{text(short(tip, 400))}</title>"
        f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="7" fill="#fff" '
        f'stroke="{colour}" stroke-width="2"/>'
        f'<rect x="{x}" y="{y}" width="7" height="{NODE_H}" rx="3" fill="{colour}"/>'
        f'<text x="{x + 14}" y="{y + 16}" class="node-id">{text(short(task.task_id, 22))}</text>'
        f'<text x="{x + 14}" y="{y + 30}" class="node-state">{text(task.state)}'
        f" · attempt {task.attempt}</text></g></a>"
    )


def timeline(report: Report) -> str:
    """A lane for the leadership (each lease, its epoch, failovers marked) and one per
    member (each attempt as a bar from its start to its end, coloured by outcome)."""
    begin = report.started_at
    if begin is None:
        return '<p class="empty">the event log is empty (or was trimmed)</p>'
    end = max(report.ended_at or begin, begin + 1e-3)
    if any(a.outcome == "open" for a in report.attempts):
        end = max(end, report.generated_at)
    scale = TIMELINE_W / (end - begin)

    def x(at: float) -> float:
        return LABEL_W + (min(max(at, begin), end) - begin) * scale

    members = _lanes(report)
    lanes = [("leadership", 0), *((m, n + 1) for n, m in enumerate(members))]
    height = AXIS_H + len(lanes) * LANE_H + 8
    parts = [_axis(begin, end, x, height)]
    for name, n in lanes:
        y = AXIS_H + n * LANE_H
        parts.append(
            f'<rect x="0" y="{y}" width="{LABEL_W + TIMELINE_W}" height="{LANE_H}" '
            f'class="lane{n % 2}"/><text x="6" y="{y + 19}" class="lane-name">'
            f"{text(short(name, 17))}<title>{text(name)}</title></text>"
        )
    for term in report.terms:
        left, right = x(term.started_at), x(term.ended_at or end)
        what = f"epoch {term.epoch}: {term.holder}" + (" (failover)" if term.failover else "")
        parts.append(
            _bar(
                left,
                right,
                AXIS_H,
                "#5b6b86" if not term.failover else "#c0392b",
                what,
                f"e{term.epoch} {term.holder}",
            )
        )
    for attempt in report.attempts:
        lane = members.index(attempt.member) + 1 if attempt.member in members else None
        if lane is None or attempt.began is None:
            continue
        right = x(attempt.ended_at if attempt.ended_at is not None else end)
        parts.append(
            _bar(
                x(attempt.began),
                right,
                AXIS_H + lane * LANE_H,
                OUTCOME_COLOURS.get(attempt.outcome, "#8a8f98"),
                _attempt_tip(attempt),
                f"{attempt.task_id} #{attempt.attempt}",
                attempt=attempt.key,
            )
        )
    for mark in report.members:
        if mark.member in members:
            y = AXIS_H + (members.index(mark.member) + 1) * LANE_H
            parts.append(
                f'<path class="mark-{mark.kind}" d="M{x(mark.at):.1f},{y + 2} v{LANE_H - 4}">'
                f"<title>{text(mark.member)} {mark.kind} at {clock(mark.at)}</title></path>"
            )
    width = LABEL_W + TIMELINE_W + 10
    return (
        f'<svg class="timeline" role="img" aria-label="timeline of leaders and attempts" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


def _lanes(report: Report) -> list[str]:
    """Members in the order they first show up: attempts first, then joins."""
    seen = [a.member for a in report.attempts if a.member]
    seen += [m.member for m in report.members]
    return list(dict.fromkeys(seen))


def _axis(begin: float, end: float, x: Callable[[float], float], height: int) -> str:
    ticks = []
    for n in range(6):
        at = begin + (end - begin) * n / 5
        left = x(at)
        label = clock(begin) if n == 0 else f"+{seconds(at - begin)}"
        anchor_at = "start" if n == 0 else "end" if n == 5 else "middle"
        ticks.append(
            f'<line x1="{left:.1f}" y1="{AXIS_H - 6}" x2="{left:.1f}" y2="{height}" '
            f'class="tick"/><text x="{left:.1f}" y="{AXIS_H - 10}" text-anchor="{anchor_at}" '
            f'class="tick-label">{text(label)}</text>'
        )
    return "".join(ticks)


def _bar(
    left: float, right: float, y: int, colour: str, tip: str, label: str, attempt: str = ""
) -> str:
    width = max(right - left, 3.0)
    shown = short(label, max(0, int(width / 7)))
    data = f' data-attempt="{text(attempt)}"' if attempt else ""
    inner = (
        f'<text x="{left + 4:.1f}" y="{y + 19}" class="bar-label">{text(shown)}</text>'
        if len(shown) >= 3
        else ""
    )
    return (
        f'<g class="bar"{data}><title>{text(short(tip, 600))}</title>'
        f'<rect x="{left:.1f}" y="{y + 5}" width="{width:.1f}" height="{LANE_H - 10}" rx="4" '
        f'fill="{colour}"/>{inner}</g>'
    )


def _attempt_tip(attempt: AttemptRow) -> str:
    took = (
        seconds(attempt.ended_at - attempt.began)
        if attempt.ended_at is not None and attempt.began is not None
        else "still open"
    )
    epoch = f", epoch {attempt.epoch}" if attempt.epoch is not None else ""
    why = f": {attempt.reason}" if attempt.reason else ""
    return f"{attempt.key} by {attempt.member}{epoch}, {took} — {attempt.outcome}{why}"
