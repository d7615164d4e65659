"""Narrating the demo from the event log, and the closing summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console

from tenure.console.safe import safe_text
from tenure.store import Event, Store

NARRATED = {
    "leader.elected": "[bold magenta]leader[/] {leader} elected at epoch {epoch}",
    "leader.stepped_down": "[bold magenta]leader[/] {leader} stepped down without acting: {reason}",
    "leader.adopted": "[magenta]new leader adopts[/] {task_id} (attempt {attempt} on {assignee})",
    "task.retry": "[yellow]retry[/] {task_id} after attempt {attempt}: {why}",
    "follower.stale_envelope_ignored": "[red]fenced[/] {member} ignored an epoch-{epoch} envelope "
    "for {task_id} (highest seen: {highest})",
    "follower.fenced": "[red]fenced[/] the store refused {member}'s epoch-{epoch} write for {task_id}",
    "inbox.added": "[red]inbox[/] {task_id}: {reason}",
}


@dataclass
class Story:
    """Follows the event log, prints what matters, and counts what happened."""

    store: Store
    team: str
    console: Console
    after: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    events: list[Event] = field(default_factory=list)

    def poll(self) -> list[Event]:
        fresh = self.store.events(self.team, after=self.after)
        for event in fresh:
            self.after = event.seq
            self.events.append(event)
            self._count(event)
            self._narrate(event)
        return fresh

    def _count(self, event: Event) -> None:
        self.counts[event.kind] += 1
        data = event.data
        if event.kind == "verify.verdict" and not data.get("passed"):
            self.counts[f"rejected.{data.get('check')}"] += 1
        if event.kind == "task.transition" and data.get("to") == "done":
            self.counts["done"] += 1

    def _narrate(self, event: Event) -> None:
        data = {**event.data, "epoch": event.epoch if event.epoch is not None else "-"}
        if event.kind in ("follower.stale_envelope_ignored", "follower.fenced"):
            data["epoch"] = event.data.get("epoch", "?")
        template = NARRATED.get(event.kind)
        if event.kind == "verify.verdict" and not data.get("passed"):
            template = "[red]rejected[/] {task_id} ({key}): {check} check: {reason}"
        elif event.kind == "task.transition" and data.get("to") == "done":
            template = "[green]accepted[/] {task_id}: {reason}"
        if template is None:
            return
        shown = {key: safe_text(value) for key, value in data.items()}  # members wrote these
        try:
            line = template.format_map(_Default(shown))
        except (ValueError, IndexError):
            line = safe_text(f"{event.kind} {event.data}")
        self.console.print(f"  [dim]{event.seq:>4}[/] {line}", soft_wrap=True)

    def first(self, kind: str, **match: object) -> Event | None:
        for event in self.events:
            if event.kind == kind and all(event.data.get(k) == v for k, v in match.items()):
                return event
        return None


class _Default(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "?"
