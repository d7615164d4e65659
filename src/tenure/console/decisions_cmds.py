"""``tenure decisions``: the decision log, readable — every verdict and every tie-break."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tenure.console.app import StoreOption, app, fail, out, store_url
from tenure.store import Event, Store, open_store
from tenure.verify.decisions import DECISION_EVENT, VERDICT_EVENT

KINDS = (VERDICT_EVENT, DECISION_EVENT)
_OUTCOME_STYLE = {
    "passed": "green",
    "failed": "red",
    "winner": "green",
    "escalated": "bold magenta",
    "undecided": "yellow",
    "abstained": "dim",
}


def decision_events(store: Store, team: str | None, task_id: str | None) -> list[Event]:
    """Verdict and decision events, oldest first; with ``task_id``, that task's and its
    quorum voters' (``<task>.q<round>.v<i>``)."""
    found: list[Event] = []
    after = 0
    while True:
        page = store.events(team, after=after, limit=1000)
        if not page:
            return found
        after = page[-1].seq
        for event in page:
            if event.kind in KINDS and (task_id is None or _about(event.data, task_id)):
                found.append(event)


def _about(data: dict[str, Any], task_id: str) -> bool:
    subject = str(data.get("task_id", ""))
    return (
        subject == task_id
        or data.get("replica_of") == task_id
        or subject.startswith(f"{task_id}.q")
    )


@app.command()
def decisions(
    task_id: Annotated[
        str | None,
        typer.Argument(metavar="TASK", help="Only this task (and its quorum voters)."),
    ] = None,
    store: StoreOption = None,
    team: Annotated[str | None, typer.Option("--team", "-t", help="Only this team.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")] = False,
) -> None:
    """Show the decision log: each verification verdict and tie-break, with its inputs
    (by reference), policy, outcome and reason; warnings about correlated voters stand out.

    Example: `tenure decisions acme-price --team demo`
    """
    with open_store(store_url(store)) as opened:
        if task_id is not None and not _known(opened, team, task_id):
            teams = [team] if team else opened.teams()
            known = sorted({t.task_id for name in teams for t in opened.tasks(name)})
            shown = ", ".join(known[:10]) or "none"
            where = f"team {team!r}" if team else "this store"
            raise fail(f"{where} has no task {task_id!r} (tasks: {shown})")
        events = decision_events(opened, team, task_id)
    if as_json:
        for event in events:
            out.print(json.dumps(asdict(event)), soft_wrap=True, markup=False)
        return
    if not events:
        what = f"task {task_id!r}" if task_id else "this store"
        out.print(f"no verdicts or tie-breaks logged for {what} yet")
        return
    out.print(decision_table(events, title=f"decisions — {task_id or team or 'all teams'}"))
    warnings = sorted({w for e in events for w in e.data.get("warnings", [])})
    for warning in warnings:
        out.print(f"[bold yellow]warning:[/] {escape(warning)}", soft_wrap=True)


def decision_table(events: list[Event], *, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=True)
    for column in ("#", "time", "task", "what", "outcome", "details"):
        table.add_column(column, overflow="fold")
    for event in events:
        data = event.data
        when = datetime.fromtimestamp(event.at, UTC).strftime("%H:%M:%S")
        if event.kind == VERDICT_EVENT:
            what = f"verdict: [bold]{escape(str(data.get('check')))}[/] check"
            outcome = "passed" if data.get("passed") else "failed"
            if data.get("escalated"):
                outcome = "escalated"
        else:
            stage = str(data.get("stage", "tie-break"))
            label = {"count": "quorum count", "authority": "claim vs check"}.get(stage, stage)
            what = (
                f"{label}: [bold]{escape(str(data.get('decision')))}[/]\n"
                f"policy {escape(str(data.get('policy')))}"
            )
            outcome = str(data.get("outcome", "?"))
            if data.get("winner"):
                outcome += f"\n{data['winner']}"
        style = _OUTCOME_STYLE.get(outcome.split("\n", 1)[0], "")
        table.add_row(
            str(event.seq),
            when,
            escape(str(data.get("task_id", "-"))),
            what,
            f"[{style}]{escape(outcome)}[/]" if style else escape(outcome),
            _details(data),
        )
    return table


def _details(data: dict[str, Any]) -> str:
    lines = []
    inputs = data.get("inputs") or []
    for item in inputs[:8]:
        if isinstance(item, dict):
            who = ", ".join(str(item[k]) for k in ("member", "model") if item.get(k) is not None)
            extra = f" ({who})" if who else ""
            answer = f" = {item['answer']}" if "answer" in item else ""
            lines.append(f"in: {escape(str(item.get('ref')))}{escape(extra)}{escape(answer)}")
        else:
            lines.append(f"in: {escape(str(item))}")
    for step in data.get("steps", []):
        winner = f" {step['winner']}" if step.get("winner") else ""
        lines.append(
            f"step {escape(str(step.get('policy')))}: {escape(str(step.get('outcome')))}"
            f"{escape(winner)} — {escape(str(step.get('reason', ''))[:160])}"
        )
    lines.append(f"why: {escape(str(data.get('reason', '')))}")
    for warning in data.get("warnings", []):
        lines.append(f"[yellow]⚠ {escape(str(warning))}[/]")
    return "\n".join(lines)


def _known(store: Store, team: str | None, task_id: str) -> bool:
    for name in [team] if team else store.teams():
        if any(t.task_id == task_id for t in store.tasks(name)):
            return True
    return False
