"""The screen of ``tenure watch``: a Textual app over :class:`watch_data.Watcher`.

It refreshes on a timer by reading the store; the only writes are a person's, from
the keyboard: answering or cancelling a task waiting in the inbox (the runtime's
``answer`` and ``cancel``, as ``tenure answer`` and ``tenure cancel`` do). Text a
member wrote reaches a widget as a ``rich.text.Text`` made by ``safe.plain``: a
Text is never read as markup, Rich's or Textual's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, Label, RichLog, Static, Tree
from textual.widgets.tree import TreeNode

from tenure.console.keys_cmds import keys_root
from tenure.console.safe import plain
from tenure.console.state_cmds import age
from tenure.console.watch_data import InboxRow, Snapshot, SpendRow, TeamRow, Watcher
from tenure.protocol import TenureError
from tenure.protocol.clip import ELLIPSIS, clip
from tenure.protocol.secrets import redact_url
from tenure.protocol.words import counted
from tenure.roles.teams import inbox as runtime

STATE_STYLE = {
    "blocked": "bold red",
    "failed": "red",
    "running": "yellow",
    "review": "cyan",
    "queued": "",
    "cancelled": "dim",
    "done": "green",
    "busy": "yellow",
    "idle": "green",
    "dead": "bold red",
    "left": "dim",
}


def shown(value: object, style: str = "") -> Text:
    """Member-written text for a widget: secrets redacted, controls visible, no markup."""
    return Text(plain(value), style=style)


def first_line(value: str, width: int) -> str:
    """A cell's text: the first line, cut at a word boundary to ``width``, marked with
    an ellipsis when there is more."""
    lines = value.strip().splitlines() or [""]
    line = clip(lines[0], width)
    return line if len(lines) == 1 or line.endswith(ELLIPSIS) else f"{line} {ELLIPSIS}"


def team_label(row: TeamRow) -> Text:
    name = row.team if row.depth == 0 else row.team.rsplit("/", 1)[1]
    label = shown(name, "bold")
    if row.leader is None:
        label.append("  vacant", "dim")
    else:
        left = max(0.0, row.lease_left or 0.0)
        label.append("  leader ")
        label.append_text(shown(row.leader, "cyan"))
        label.append(f"  epoch {row.epoch}  lease {left:.1f}s")
    counts = ", ".join(f"{n} {state}" for state, n in row.counts.items())
    label.append(f"  {counts or 'no tasks'}", "dim")
    return label


def spend_text(rows: Iterable[SpendRow]) -> Text:
    text = Text()
    for row in rows:
        text.append_text(shown(row.team, "bold"))
        calls = counted(row.calls, "call")
        text.append(f": {counted(row.tokens, 'token')}, ${row.cost_usd:.4f} in {calls}")
        limits = row.limits
        if limits is not None:
            caps = []
            if limits.tokens is not None:
                caps.append(f"{row.tokens}/{limits.tokens} tokens")
            if limits.cost_usd is not None:
                caps.append(f"${row.cost_usd:.4f}/${limits.cost_usd:g}")
            if limits.wall_seconds is not None:
                caps.append(f"{row.wall_seconds:.0f}/{limits.wall_seconds:g}s")
            text.append(f"  budget {', '.join(caps) or 'none'}", "magenta")
        text.append("\n")
    return text


class AskDialog(ModalScreen[str | None]):
    """One line of text from the operator (an answer, a reason); Escape gives up."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "give_up", "Cancel")]

    def __init__(self, title: str, prompt: Text, placeholder: str) -> None:
        super().__init__()
        self.heading = title
        self.prompt = prompt
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.heading, style="bold"))
            yield Static(self.prompt)
            yield Input(placeholder=self.placeholder, id="reply")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_give_up(self) -> None:
        self.dismiss(None)


class WatchApp(App[None]):
    """Teams as a tree, members, tasks, the inbox, spend and the event feed, live."""

    TITLE = "tenure watch"
    CSS = """
    #left { width: 2fr; }
    #right { width: 3fr; }
    Tree, DataTable { height: 1fr; border: round $panel; }
    #spend { height: auto; max-height: 6; border: round $panel; }
    #feed { height: 10; border: round $panel; }
    AskDialog { align: center middle; }
    #dialog { width: 80; height: auto; padding: 1 2; border: thick $accent; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("a", "answer", "Answer"),
        Binding("c", "cancel_task", "Cancel task"),
        Binding("r", "refresh_now", "Refresh"),
    ]

    def __init__(self, watcher: Watcher, interval: float = 0.5) -> None:
        super().__init__()
        self.watcher = watcher
        self.interval = interval
        self.snapshot: Snapshot | None = None
        self.problem: str | None = None
        self.tree_nodes: dict[str, TreeNode[str]] = {}
        self.fed = 0  # the last event seq written to the feed

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="left"):
                yield Tree(Text("teams"), id="teams")
                yield DataTable(id="members", cursor_type="row")
            with Vertical(id="right"):
                yield DataTable(id="inbox", cursor_type="row")
                yield DataTable(id="tasks", cursor_type="row")
                yield Static(id="spend")
        yield RichLog(id="feed", max_lines=1000, wrap=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = plain(redact_url(self.watcher.store.url))
        self.columns("members", "team", "member", "state", "task", "beat")
        self.columns("inbox", "team", "task", "state", "waiting", "attempts", "why")
        self.columns("tasks", "team", "task", "state", "attempts", "age", "assignee", "reason")
        for table_id, title in (("members", "members"), ("inbox", "inbox"), ("tasks", "tasks")):
            self.query_one(f"#{table_id}", DataTable).border_title = title
        self.query_one("#spend", Static).border_title = "spend"
        self.query_one("#feed", RichLog).border_title = "events"
        self.query_one("#teams", Tree).show_root = False
        self.action_refresh_now()
        self.set_interval(self.interval, self.action_refresh_now)

    def columns(self, table_id: str, *names: str) -> None:
        self.query_one(f"#{table_id}", DataTable).add_columns(*names)

    # --- refreshing -------------------------------------------------------------------

    def action_refresh_now(self) -> None:
        try:
            snap = self.watcher.snapshot()
        except TenureError as exc:  # the store is away for now: say so, keep the last view
            self.problem = plain(exc)
            self.title = f"tenure watch — {self.problem}"
            return
        try:
            self.query_one("#members", DataTable)
        except (NoMatches, ScreenStackError):
            return  # a tick that came as the app closed: its widgets are gone
        self.problem = None
        self.snapshot = snap
        root = plain(snap.root) if snap.root else "all teams"
        self.title = f"tenure watch — {root} — {len(snap.teams)} team(s), {snap.live_members} live"
        self.show_tree(snap)
        self.show_members(snap)
        self.show_inbox(snap)
        self.show_tasks(snap)
        self.query_one("#spend", Static).update(spend_text(snap.spend))
        self.show_feed(snap)

    def show_tree(self, snap: Snapshot) -> None:
        """Relabel the tree in place; rebuild it only when the set of teams changed."""
        teams = tuple(row.team for row in snap.teams)
        if teams == tuple(self.tree_nodes):
            for row in snap.teams:
                self.tree_nodes[row.team].set_label(team_label(row))
            return
        tree: Tree[str] = self.query_one("#teams", Tree)
        tree.clear()
        self.tree_nodes = {}
        for row in snap.teams:
            parent = tree.root
            ancestor = row.team
            while "/" in ancestor:  # under the nearest ancestor that is shown
                ancestor = ancestor.rsplit("/", 1)[0]
                if ancestor in self.tree_nodes:
                    parent = self.tree_nodes[ancestor]
                    break
            self.tree_nodes[row.team] = parent.add(team_label(row), data=row.team, expand=True)
        tree.root.expand_all()

    def show_members(self, snap: Snapshot) -> None:
        self.fill(
            "members",
            [
                (
                    (m.team, m.member_id),
                    [
                        shown(m.team),
                        shown(m.member_id + (" (leader)" if m.leader else "")),
                        shown(m.state, STATE_STYLE.get(m.state, "")),
                        shown(m.task or "-"),
                        Text("-" if m.beat_age is None else age(m.beat_age)),
                    ],
                )
                for m in snap.members
            ],
        )

    def show_inbox(self, snap: Snapshot) -> None:
        self.fill(
            "inbox",
            [
                (
                    (i.team, i.task_id),
                    [
                        shown(i.team),
                        shown(i.task_id, "bold"),
                        shown(i.state, STATE_STYLE.get(i.state, "")),
                        Text(age(i.waiting)),
                        Text(str(i.attempts)),
                        shown(first_line(i.why, 200)),
                    ],
                )
                for i in snap.inbox
            ],
        )

    def show_tasks(self, snap: Snapshot) -> None:
        self.fill(
            "tasks",
            [
                (
                    (t.team, t.task_id),
                    [
                        shown(t.team),
                        shown(t.task_id),
                        shown(t.state, STATE_STYLE.get(t.state, "")),
                        Text(f"{t.attempts}/{t.max_attempts}"),
                        Text(age(t.age)),
                        shown(t.assignee or "-"),
                        shown(first_line(t.reason, 120)),
                    ],
                )
                for t in snap.tasks
            ],
        )

    def fill(self, table_id: str, rows: list[tuple[tuple[str, str], list[Text]]]) -> None:
        """Show these rows: changed cells only while the rows are the same ones, else
        all anew with the cursor kept on the row it was on."""
        table: DataTable[Text] = self.query_one(f"#{table_id}", DataTable)
        keys = ["\x00".join(key) for key, _ in rows]
        if keys == [str(row_key.value) for row_key in table.rows]:
            columns = list(table.columns)
            for row_key, (_, cells) in zip(keys, rows, strict=True):
                for column, old, new in zip(columns, table.get_row(row_key), cells, strict=True):
                    if old != new:
                        table.update_cell(row_key, column, new, update_width=True)
            return
        selected = self.selected_key(table)
        table.clear()
        for index, (key, cells) in enumerate(rows):
            table.add_row(*cells, key="\x00".join(key))
            if key == selected:
                table.move_cursor(row=index)

    def show_feed(self, snap: Snapshot) -> None:
        log = self.query_one("#feed", RichLog)
        for row in snap.feed:
            if row.seq <= self.fed:
                continue
            self.fed = row.seq
            when = datetime.fromtimestamp(row.at, UTC).strftime("%H:%M:%S")
            line = Text(f"{row.seq:>6} {when} ", style="dim")
            line.append_text(shown(row.team, "cyan"))
            line.append(" ")
            line.append_text(shown(row.kind, "bold"))
            line.append(" ")
            line.append_text(shown(first_line(row.details, 300)))
            log.write(line)

    # --- the operator's keys ----------------------------------------------------------

    @staticmethod
    def selected_key(table: DataTable[Text]) -> tuple[str, str] | None:
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        team, _, task_id = str(row_key.value).partition("\x00")
        return team, task_id

    def selected_inbox(self) -> InboxRow | None:
        key = self.selected_key(self.query_one("#inbox", DataTable))
        if key is None or self.snapshot is None:
            return None
        return next((i for i in self.snapshot.inbox if (i.team, i.task_id) == key), None)

    def action_answer(self) -> None:
        item = self.selected_inbox()
        if item is None:
            self.notify("the inbox is empty: nothing to answer", severity="warning", markup=False)
            return
        prompt = shown(f"{item.team} / {item.task_id} ({item.state}): {clip(item.why, 2000)}")

        def take(text: str | None) -> None:
            if text is not None:
                self.operate(
                    lambda: runtime.answer(
                        self.watcher.store, item.team, item.task_id, text, keys=keys_root(None)
                    ),
                    f"answered {item.task_id}: re-queued with your answer",
                )

        self.push_screen(AskDialog("Answer", prompt, "your answer, then Enter"), take)

    def action_cancel_task(self) -> None:
        """Cancel the task selected in the focused table (the inbox's when neither is)."""
        focused = self.focused
        table_id = focused.id if isinstance(focused, DataTable) else "inbox"
        if table_id not in ("inbox", "tasks"):
            table_id = "inbox"
        key = self.selected_key(self.query_one(f"#{table_id}", DataTable))
        if key is None:
            self.notify(f"no task selected in {table_id}", severity="warning", markup=False)
            return
        team, task_id = key
        prompt = shown(f"cancel {team} / {task_id}: why?")

        def take(reason: str | None) -> None:
            if reason is not None:
                self.operate(
                    lambda: runtime.cancel(
                        self.watcher.store, team, task_id, reason, keys=keys_root(None)
                    ),
                    f"cancelled {task_id}",
                )

        self.push_screen(AskDialog("Cancel task", prompt, "a reason, then Enter"), take)

    def operate(self, act: Callable[[], object], done: str) -> None:
        """Do the operator's write; a refusal (already answered, say) is a notice."""
        try:
            act()
        except TenureError as exc:
            self.notify(plain(exc), severity="error", markup=False)
            return
        self.notify(plain(done), markup=False)
        self.action_refresh_now()
