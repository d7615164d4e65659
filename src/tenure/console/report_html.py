"""A run report as one self-contained HTML page: nothing fetched, nothing run.

The page carries its CSS and SVG inline and no script at all; its Content Security
Policy forbids scripts and every fetch as well, so even text that escaped escaping
could neither run nor call out. Every dynamic string goes through
``report_text.text``.
"""

from __future__ import annotations

from tenure.console.report_svg import OUTCOME_COLOURS, anchor, plan_graph, timeline
from tenure.console.report_text import STATE_COLOURS, clock, moment, seconds, short, text
from tenure.protocol.secrets import redact_url
from tenure.protocol.words import counted
from tenure.roles.register import spend as budget
from tenure.roles.teams.reading import DecisionRecord
from tenure.roles.teams.report import AttemptRow, Report, TaskRow

REASON_LIMIT = 4000
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
STYLE = """
:root { --ink:#1d2330; --muted:#5f6b7a; --line:#dde2e8; --bg:#f6f7f9; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--ink); background:var(--bg); }
header { background:#1f2a3c; color:#fff; padding:18px 28px; }
header h1 { margin:0 0 4px; font-size:22px; font-weight:600; }
header .meta { color:#c4ccd8; font-size:13px; }
nav { background:#fff; border-bottom:1px solid var(--line); padding:8px 28px;
  position:sticky; top:0; z-index:1; }
nav a { margin-right:16px; color:#2a5db0; text-decoration:none; font-weight:500; }
main { padding:8px 28px 40px; max-width:1500px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px;
  padding:14px 18px; margin:16px 0; overflow-x:auto; }
h2 { font-size:17px; margin:0 0 10px; }
h3 { font-size:15px; margin:14px 0 6px; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { text-align:left; vertical-align:top; padding:5px 8px; border-bottom:1px solid var(--line); }
th { background:#f0f2f5; font-weight:600; white-space:nowrap; }
td.num { text-align:left; font-variant-numeric:tabular-nums; white-space:nowrap; }
code, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12.5px; }
pre.reason { white-space:pre-wrap; word-break:break-word; margin:0; max-height:14em;
  overflow:auto; font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
.chips { margin-top:10px; }
.chip { display:inline-block; padding:2px 9px; border-radius:11px; margin:0 6px 4px 0;
  font-size:12.5px; color:#fff; }
.pill { display:inline-block; padding:0 7px; border-radius:9px; color:#fff; font-size:12px;
  white-space:nowrap; }
.task { border-top:1px solid var(--line); padding-top:6px; margin-top:10px; }
.task:target { background:#fff8e1; }
.goal { color:var(--muted); }
.why { display:flex; gap:6px; color:var(--muted); }
.why pre { color:var(--ink); }
.empty { color:var(--muted); font-style:italic; }
.warn { color:#9a5b00; }
svg text { font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
.node-id { font-size:12.5px; font-weight:600; fill:#1d2330; }
.node-state { font-size:11px; fill:#5f6b7a; }
.lane0 { fill:#fbfcfd; } .lane1 { fill:#f1f3f6; }
.lane-name { font-size:12px; fill:#1d2330; }
.tick { stroke:#d5dae1; stroke-width:1; }
.tick-label { font-size:11px; fill:#5f6b7a; }
.bar-label { font-size:11px; fill:#fff; pointer-events:none; }
.mark-joined { stroke:#2e9e5b; stroke-width:2; } .mark-left { stroke:#b52b27; stroke-width:2; }
.legend span { margin-right:12px; font-size:12.5px; white-space:nowrap; }
.legend i { display:inline-block; width:11px; height:11px; border-radius:3px;
  margin-right:4px; vertical-align:-1px; }
"""


def render(report: Report) -> str:
    """The whole page."""
    body = "".join(
        [
            _header(report),
            '<nav><a href="#plan">Plan</a><a href="#timeline">Timeline</a>'
            '<a href="#tasks">Tasks</a><a href="#failures">Failures</a>'
            '<a href="#decisions">Decisions</a><a href="#inbox">Inbox</a>'
            '<a href="#spend">Spend</a></nav><main>',
            _section("plan", "Plan", plan_graph(report.tasks)),
            _section("timeline", "Timeline", _legend() + timeline(report)),
            _section("tasks", "Tasks and their attempts", _tasks(report)),
            _section("failures", "Failures", _failures(report)),
            _section("decisions", "Verdicts and tie-breaks", _decisions(report.decisions)),
            _section("inbox", "Inbox history", _inbox(report)),
            _section("spend", "Spend", _spend(report)),
            "</main>",
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tenure report — {text(report.team)}</title><style>{STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def _section(ident: str, title: str, inner: str) -> str:
    return f'<section id="{ident}"><h2>{title}</h2>{inner}</section>'


def _header(report: Report) -> str:
    counts: dict[str, int] = {}
    for row in report.tasks:
        counts[row.task.state] = counts.get(row.task.state, 0) + 1
    chips = "".join(
        f'<span class="chip" style="background:{STATE_COLOURS.get(state, "#7a8290")}">'
        f"{n} {text(state)}</span>"
        for state, n in sorted(counts.items())
    )
    leader = text(report.leader) if report.leader else "vacant"
    span = ""
    if report.started_at is not None and report.ended_at is not None:
        span = (
            f" · log {moment(report.started_at)} → {clock(report.ended_at)} "
            f"({seconds(report.ended_at - report.started_at)}, events {report.first_seq}–"
            f"{report.last_seq})"
        )
    return (
        f'<header><h1>Team {text(report.team)}</h1><div class="meta">'
        f"store {text(redact_url(report.store_url))} · epoch {report.epoch} · leader {leader}"
        f" · {counted(len(report.tasks), 'task')}, "
        f"{counted(len(report.attempts), 'attempt')} · spend "
        f"{text(_totals(report.totals))}{span} · generated {moment(report.generated_at)}"
        f'</div><div class="chips">{chips}</div></header>'
    )


def _legend() -> str:
    items = "".join(
        f'<span><i style="background:{colour}"></i>{outcome}</span>'
        for outcome, colour in OUTCOME_COLOURS.items()
    )
    return (
        f'<p class="legend">{items}<span><i style="background:#5b6b86"></i>lease (epoch)'
        '</span><span><i style="background:#c0392b"></i>failover</span></p>'
    )


def _tasks(report: Report) -> str:
    by_task: dict[str, list[AttemptRow]] = {}
    for attempt in report.attempts:
        by_task.setdefault(attempt.task_id, []).append(attempt)
    if not report.tasks:
        return '<p class="empty">no tasks</p>'
    return "".join(
        _task(row, n, sorted(by_task.get(row.task_id, []), key=lambda a: a.attempt))
        for n, row in enumerate(report.tasks)
    )


def _task(row: TaskRow, index: int, attempts: list[AttemptRow]) -> str:
    task = row.task
    deps = ", ".join(text(d) for d in task.spec.depends_on) or "none"
    reason = (
        f'<div class="why">reason: <pre class="reason">{_reason(task.reason)}</pre></div>'
        if task.reason
        else ""
    )
    problem = f'<p class="warn">unreadable: {text(task.problem)}</p>' if task.problem else ""
    return (
        f'<div class="task" id="{anchor(index)}" data-task="{text(task.task_id)}">'
        f"<h3><code>{text(task.task_id)}</code> {_pill(task.state, STATE_COLOURS)}</h3>"
        f'<div class="goal">{text(short(task.spec.goal, 600))}</div>'
        f"<div>depends on: {deps} · {_attempts_used(row)}"
        f" · assignee {text(task.assignee or '-')} · spend {text(_totals(row.spend))}</div>"
        f"{problem}{reason}{_attempt_table(attempts)}</div>"
    )


def _attempts_used(row: TaskRow) -> str:
    task = row.task
    if task.data.attempt_base:  # answered: the attempts start over
        return (
            f"attempt {task.attempt}, {task.used_attempts} of {task.spec.max_attempts} "
            "since the last answer"
        )
    return f"attempt {task.attempt} of {task.spec.max_attempts}"


def _attempt_table(attempts: list[AttemptRow]) -> str:
    if not attempts:
        return '<p class="empty">no attempt yet</p>'
    rows = "".join(
        f'<tr data-attempt="{text(a.key)}"><td class="num">{a.attempt}</td>'
        f'<td>{text(a.member or "-")}</td><td class="num">{_epoch(a.epoch)}</td>'
        f'<td class="num">{clock(a.began)}</td><td class="num">{_took(a)}</td>'
        f"<td>{text(a.status or '-')}</td><td>{_pill(a.outcome, OUTCOME_COLOURS)}</td>"
        f'<td>{_verdicts(a.verdicts)}</td><td><pre class="reason">{_reason(a.reason)}</pre></td>'
        "</tr>"
        for a in attempts
    )
    return (
        "<table><tr><th>#</th><th>member</th><th>epoch</th><th>started</th><th>took</th>"
        "<th>reported</th><th>outcome</th><th>verdicts</th><th>reason</th></tr>"
        f"{rows}</table>"
    )


def _failures(report: Report) -> str:
    failed = report.failures
    rows = "".join(
        f'<tr><td><a href="#{_task_anchor(report, a.task_id)}"><code>{text(a.task_id)}</code>'
        f'</a></td><td class="num">{a.attempt}</td><td>{text(a.member or "-")}</td>'
        f'<td class="num">{_epoch(a.epoch)}</td><td>{_pill(a.outcome, OUTCOME_COLOURS)}</td>'
        f'<td><pre class="reason">{_reason(a.reason)}</pre></td></tr>'
        for a in failed
    )
    table = (
        "<table><tr><th>task</th><th>#</th><th>member</th><th>epoch</th><th>outcome</th>"
        f"<th>reason</th></tr>{rows}</table>"
        if failed
        else '<p class="empty">no attempt failed</p>'
    )
    if not report.trouble:
        return table
    events = "".join(
        f'<tr><td class="num">{e.seq}</td><td class="num">{clock(e.at)}</td>'
        f'<td><code>{text(e.kind)}</code></td><td><pre class="reason">'
        f"{_reason(' '.join(f'{k}={v}' for k, v in e.data.items()))}</pre></td></tr>"
        for e in report.trouble
    )
    return (
        f"{table}<h3>Refusals, step-downs and errors in the log</h3><table><tr><th>seq</th>"
        f"<th>time</th><th>event</th><th>details</th></tr>{events}</table>"
    )


def _decisions(records: list[DecisionRecord]) -> str:
    if not records:
        return '<p class="empty">no verdicts or tie-breaks logged</p>'
    rows = "".join(
        f'<tr><td class="num">{r.seq}</td><td class="num">{clock(r.at)}</td>'
        f"<td><code>{text(r.task_id or '-')}</code></td><td>{_what(r)}</td>"
        f"<td>{_pill(r.outcome, _DECISION_COLOURS)}</td>"
        f'<td><pre class="reason">{_reason(r.reason)}</pre>{_warnings(r)}</td></tr>'
        for r in records
    )
    return (
        "<table><tr><th>seq</th><th>time</th><th>task</th><th>what</th><th>outcome</th>"
        f"<th>why</th></tr>{rows}</table>"
    )


_DECISION_COLOURS = {
    "passed": "#2e9e5b",
    "failed": "#b52b27",
    "winner": "#2e9e5b",
    "escalated": "#8e44ad",
    "undecided": "#e0a030",
    "abstained": "#8a8f98",
}


def _what(record: DecisionRecord) -> str:
    if record.kind == "verdict":
        return f"verdict of the <b>{text(record.subject)}</b> check"
    winner = f"; winner {text(record.winner)}" if record.winner else ""
    return (
        f"{text(record.stage)}: <b>{text(record.subject)}</b> (policy "
        f"{text(record.policy or '-')}{winner})"
    )


def _warnings(record: DecisionRecord) -> str:
    return "".join(f'<div class="warn">⚠ {text(w)}</div>' for w in record.warnings)


def _inbox(report: Report) -> str:
    if not report.inbox:
        return '<p class="empty">nothing was sent to a person</p>'
    rows = "".join(
        f'<tr><td class="num">{clock(i.at)}</td><td><code>{text(i.task_id)}</code></td>'
        f'<td>{text(i.kind)}</td><td><pre class="reason">{_reason(i.text)}</pre></td></tr>'
        for i in report.inbox
    )
    return f"<table><tr><th>time</th><th>task</th><th>what</th><th>text</th></tr>{rows}</table>"


def _spend(report: Report) -> str:
    rows = []
    for row in report.tasks:
        for entry in row.task.data.spend_log:
            what = entry.kind or f"attempt {entry.attempt}"
            flags = " (given up)" if entry.abandoned else ""
            rows.append(
                f"<tr><td><code>{text(row.task_id)}</code></td><td>{text(what)}{flags}</td>"
                f"<td>{text(entry.member or '-')}</td><td>{text(entry.model or '-')}</td>"
                f'<td class="num">{entry.input_tokens}</td><td class="num">'
                f'{entry.output_tokens}</td><td class="num">{entry.calls}</td>'
                f'<td class="num">${entry.cost_usd:.4f}</td><td class="num">'
                f"{seconds(entry.seconds)}</td></tr>"
            )
    total = f"<p>team total: <b>{text(_totals(report.totals))}</b> in {report.totals.calls} call(s)"
    if report.totals.unpriced:
        total += f", {report.totals.unpriced} unpriced (counted as $0)"
    total += "</p>"
    if not rows:
        return total + '<p class="empty">no spend recorded</p>'
    return (
        f"{total}<table><tr><th>task</th><th>for</th><th>member</th><th>model</th>"
        "<th>input tokens</th><th>output tokens</th><th>calls</th><th>cost</th><th>wall</th>"
        f"</tr>{''.join(rows)}</table>"
    )


def _totals(totals: budget.Totals) -> str:
    return f"{totals.tokens} tokens, ${totals.cost_usd:.4f}, {seconds(totals.seconds)}"


def _pill(value: str, colours: dict[str, str]) -> str:
    colour = colours.get(value, "#7a8290")
    return f'<span class="pill" style="background:{colour}">{text(value)}</span>'


def _reason(value: str) -> str:
    return text(short(value, REASON_LIMIT))


def _epoch(epoch: int | None) -> str:
    return "-" if epoch is None else f"e{epoch}"


def _took(attempt: AttemptRow) -> str:
    if attempt.began is None:
        return "-"
    if attempt.ended_at is None:
        return "open"
    return seconds(attempt.ended_at - attempt.began)


def _verdicts(records: list[DecisionRecord]) -> str:
    return (
        " ".join(
            _pill(
                f"{r.subject}: {r.outcome}",
                {r.subject + ": " + r.outcome: _DECISION_COLOURS.get(r.outcome, "#7a8290")},
            )
            for r in records
        )
        or "-"
    )


def _task_anchor(report: Report, task_id: str) -> str:
    return next(
        (anchor(n) for n, row in enumerate(report.tasks) if row.task_id == task_id), "tasks"
    )
