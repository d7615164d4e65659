"""``tenure decisions``: the decision log, readable — every verdict and every tie-break."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from tenure.console import jsonout, params
from tenure.console.app import StoreOption, app, fail, out
from tenure.console.jsonout import JsonOption
from tenure.console.safe import safe_text
from tenure.console.stores import existing, require_team
from tenure.protocol.clip import clip
from tenure.roles.teams.reading import DecisionRecord, decision_events, read_decision
from tenure.store import Store

_OUTCOME_STYLE = {
    "passed": "green",
    "failed": "red",
    "winner": "green",
    "escalated": "bold magenta",
    "undecided": "yellow",
    "abstained": "dim",
}


@app.command()
def decisions(
    task_id: Annotated[
        str | None,
        typer.Argument(metavar="TASK", help="Only this task (and its quorum voters)."),
    ] = None,
    store: StoreOption = None,
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="Only this team.", callback=params.team)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show the decision log: each verification verdict and tie-break, with its inputs
    (by reference), policy, outcome and reason; warnings about correlated voters stand out.

    Example: `tenure decisions acme-price --team demo`
    """
    with existing(store) as opened:
        require_team(opened, team)
        if task_id is not None and not _known(opened, team, task_id):
            teams = [team] if team else opened.teams()
            known = sorted({t.task_id for name in teams for t in opened.tasks(name)})
            shown = ", ".join(known[:10]) or "none"
            where = f"team {team!r}" if team else "this store"
            raise fail(f"{where} has no task {task_id!r} (tasks: {shown})")
        events = decision_events(opened, team, task_id)
    if as_json:
        jsonout.emit("decisions", team=team, task_id=task_id, decisions=events)
        return
    if not events:
        what = f"task {task_id!r}" if task_id else "this store"
        out.print(f"no verdicts or tie-breaks logged for {what} yet")
        return
    records = [read_decision(e) for e in events]
    out.print(decision_table(records, title=f"decisions — {task_id or team or 'all teams'}"))
    for warning in sorted({w for r in records for w in r.warnings}):
        out.print(f"[bold yellow]warning:[/] {safe_text(warning)}", soft_wrap=True)


def decision_table(records: list[DecisionRecord], *, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=True)
    for column in ("#", "time", "task", "what", "outcome", "details"):
        table.add_column(column, overflow="fold")
    for record in records:
        when = datetime.fromtimestamp(record.at, UTC).strftime("%H:%M:%S")
        outcome = record.outcome
        if record.kind == "verdict":
            what = f"verdict: [bold]{safe_text(record.subject)}[/] check"
        else:
            stage = str(record.stage)
            label = {"count": "quorum count", "authority": "claim vs check"}.get(stage, stage)
            what = (
                f"{safe_text(label)}: [bold]{safe_text(record.subject)}[/]\n"
                f"policy {safe_text(str(record.policy))}"
            )
            if record.winner:
                outcome += f"\n{record.winner}"
        style = _OUTCOME_STYLE.get(record.outcome, "")
        table.add_row(
            str(record.seq),
            when,
            safe_text(record.task_id or "-"),
            what,
            f"[{style}]{safe_text(outcome)}[/]" if style else safe_text(outcome),
            _details(record),
        )
    return table


def _details(record: DecisionRecord) -> str:
    lines = []
    for item in record.inputs[:8]:
        if isinstance(item, dict):
            who = ", ".join(str(item[k]) for k in ("member", "model") if item.get(k) is not None)
            extra = f" ({who})" if who else ""
            answer = f" = {item['answer']}" if "answer" in item else ""
            lines.append(f"in: {safe_text(item.get('ref'))}{safe_text(extra)}{safe_text(answer)}")
        else:
            lines.append(f"in: {safe_text(str(item))}")
    for step in record.data.get("steps", []):
        winner = f" {step['winner']}" if step.get("winner") else ""
        lines.append(
            f"step {safe_text(str(step.get('policy')))}: {safe_text(str(step.get('outcome')))}"
            f"{safe_text(winner)} — {safe_text(clip(str(step.get('reason', '')), 160))}"
        )
    lines.append(f"why: {safe_text(record.reason)}")
    for warning in record.warnings:
        lines.append(f"[yellow]⚠ {safe_text(warning)}[/]")
    return "\n".join(lines)


def _known(store: Store, team: str | None, task_id: str) -> bool:
    for name in [team] if team else store.teams():
        if any(t.task_id == task_id for t in store.tasks(name)):
            return True
    return False
