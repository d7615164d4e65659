"""``tenure watch``: the snapshot it reads, the Textual app driven by its pilot, the
one-snapshot form for a pipe, and the real command under tmux as a person runs it.

The store is filled by a real team in a process of its own (``TEAM_SCRIPT``): a
nested team that finished, and a team whose ``hold`` task keeps a worker busy until
the test lets it go while two tasks wait in the inbox. The watcher opens the store
by URL, read-only, as the command does.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import runpy
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.console.watch_data import Snapshot, Watcher

pytest.importorskip("textual", reason="tenure watch needs textual: pip install 'tenure[tui]'")

from textual.widgets import DataTable, Input, RichLog, Tree  # noqa: E402

from tenure.console.watch_app import WatchApp  # noqa: E402

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MARKUP = "[red]login[/] needed [$accent] [link=x]here[/link]"

TEAM_SCRIPT = f"""
import pathlib, sys, time
import tenure

def stubborn(envelope, ctx):
    answers = envelope.input.get("operator_answers")
    if not answers:
        raise RuntimeError({MARKUP!r})
    return {{"price": answers[-1]["answer"]}}

def hold(envelope, ctx, flag):
    while not flag.exists():
        time.sleep(0.02)
    return "held"

research = tenure.Plan.model_validate(
    {{"team": "acme/research", "tasks": [{{"id": "survey", "goal": "survey"}}]}}
)
acme = tenure.Plan.model_validate({{
    "team": "acme",
    "budget": {{"tokens": 1000}},
    "tasks": [
        {{"id": "fetch", "goal": "fetch"}},
        {{"id": "price", "goal": "find the price", "max_attempts": 1}},
        {{"id": "quote", "goal": "get a quote", "max_attempts": 1}},
        {{"id": "hold", "goal": "hold on"}},
        {{"id": "after", "goal": "use the price", "depends_on": ["price"]}},
    ],
}})
routes = {{"fetch": "noop", "price": stubborn, "quote": stubborn, "after": "noop"}}

def main(url, flag):
    flag = pathlib.Path(flag)
    routes["hold"] = lambda envelope, ctx: hold(envelope, ctx, flag)
    with tenure.open_store(url) as store:
        tenure.Team(research, executor="noop", store=store).run(timeout=20)
        store.join("acme/research", "w-gone", ttl=0.2)  # its heartbeats stop: dead
        print(tenure.Team(acme, executor=routes, store=store).run(timeout=90), flush=True)

if __name__ == "__main__":
    main(*sys.argv[1:])
"""


class LiveTeam:
    """The team process; ``release()`` lets its ``hold`` task finish."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.flag = tmp_path / f"release-{uuid.uuid4().hex[:6]}"
        script = team_script(tmp_path)
        self.output = tmp_path / f"team-{uuid.uuid4().hex[:6]}.log"
        with self.output.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(script), url, str(self.flag)], stdout=log, stderr=log
            )

    def release(self) -> None:
        self.flag.touch()

    def wait_until(self, ready: Callable[[tenure.Store], bool], within: float = 30) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the team exited early: {self.output.read_text()}")
            try:
                with tenure.open_store(self.url, create=False) as store:
                    if ready(store):
                        return
            except tenure.StoreError:
                pass  # not made yet
            time.sleep(0.05)
        raise AssertionError("the team never got there")

    def stop(self) -> None:
        self.release()
        try:
            self.process.wait(timeout=20)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def states(store: tenure.Store, team: str = "acme") -> dict[str, str]:
    return {t.task_id: t.state for t in tenure.tasks(store, team)}


def waiting_and_busy(store: tenure.Store) -> bool:
    now = states(store)
    return (now.get("price"), now.get("quote"), now.get("hold")) == (
        "blocked",
        "blocked",
        "running",
    )


@pytest.fixture
def live_team(store_url: str, tmp_path: Path) -> Iterator[LiveTeam]:
    team = LiveTeam(store_url, tmp_path)
    try:
        team.wait_until(waiting_and_busy)
        time.sleep(0.25)  # w-gone's heartbeat lapses
        yield team
    finally:
        team.stop()


def team_script(into: Path) -> Path:
    script = into / "team.py"
    script.write_text(TEAM_SCRIPT, encoding="utf-8")
    return script


@pytest.fixture(scope="module")
def finished_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite store whose team has stopped, run in this process (its ``hold`` let go
    at once): two tasks wait in the inbox."""
    path = tmp_path_factory.mktemp("finished")
    url = f"sqlite:///{path / 'state.db'}"
    (path / "go").touch()
    runpy.run_path(str(team_script(path)))["main"](url, str(path / "go"))
    return url


def read_snapshot(url: str, team: str | None = None) -> Snapshot:
    with tenure.open_store(url, create=False) as store:
        return Watcher(store, team).snapshot()


# --- the snapshot: pure reads --------------------------------------------------------


def check_snapshot_of_a_running_team(snap: Snapshot) -> None:
    acme, research = snap.teams
    assert (acme.team, acme.depth, acme.leader, acme.epoch) == ("acme", 0, "leader", 1)
    assert acme.lease_left is not None and 0 < acme.lease_left <= 3.0
    assert acme.counts == {"blocked": 2, "running": 1, "queued": 1, "done": 1}
    assert (research.team, research.depth, research.leader) == ("acme/research", 1, None)
    members = {(m.team, m.member_id): (m.state, m.task) for m in snap.members}
    assert members[("acme/research", "w-gone")] == ("dead", None)
    assert members[("acme/research", "worker-1")] == ("left", None)
    acme_members = sorted(v for (t, _), v in members.items() if t == "acme")
    assert acme_members == [("busy", "hold"), ("idle", None)]
    assert snap.live_members == 2
    assert [(i.task_id, i.state) for i in snap.inbox] == [
        ("price", "blocked"),
        ("quote", "blocked"),
    ]
    assert snap.inbox[0].waiting >= snap.inbox[1].waiting  # oldest first
    assert MARKUP in snap.inbox[0].why
    rows = {t.task_id: t for t in snap.tasks if t.team == "acme"}
    assert [t.state for t in snap.tasks[:2]] == ["blocked", "blocked"]  # a person's first
    hold = rows["hold"]
    assert (hold.state, hold.attempts, hold.max_attempts) == ("running", 1, 3)
    busy = next(m for m in snap.members if m.state == "busy")
    assert (busy.member_id, busy.task) == (hold.assignee, "hold")
    spend = {s.team: s for s in snap.spend}
    assert spend["acme"].limits is not None and spend["acme"].limits.tokens == 1000
    assert spend["acme/research"].limits is None
    kinds = [e.kind for e in snap.feed]
    assert "member.joined" in kinds and "task.transition" in kinds
    assert [e.seq for e in snap.feed] == sorted(e.seq for e in snap.feed)


def test_the_watcher_continues_the_feed_and_sees_only_its_subtree(
    finished_url: str, tmp_path: Path
) -> None:
    with tenure.open_store(copy_store(finished_url, tmp_path), create=False) as store:
        watcher = Watcher(store, "acme/research")
        first = watcher.snapshot()
        assert [t.team for t in first.teams] == ["acme/research"]
        assert {e.team for e in first.feed} == {"acme/research"}
        seen = watcher.after
        store.append_event("acme/research", "note", {"said": "hello"})
        store.append_event("acme", "note", {"said": "elsewhere"})
        second = watcher.snapshot()
        assert watcher.after > seen
        assert second.feed[-1].kind == "note" and second.feed[-1].details == "said=hello"


# --- the app, driven by Textual's pilot ------------------------------------------------


def cells(table: DataTable[Any]) -> list[list[str]]:
    return [
        [getattr(c, "plain", str(c)) for c in table.get_row_at(i)] for i in range(table.row_count)
    ]


async def settle(
    pilot: Any, app: WatchApp, until: Callable[[], bool], *, refresh: bool = True
) -> None:
    """Until the view shows it, refreshing from the store as the timer would. (The
    tests refresh by hand: Textual's pilot waits for an idle process after each key,
    and a view redrawn every fraction of a second is never idle.)"""
    deadline = time.monotonic() + 20
    while not until():
        assert time.monotonic() < deadline, "the view never showed it"
        await pilot.pause(0.05)
        if refresh:
            app.action_refresh_now()


async def type_into_dialog(pilot: Any, app: WatchApp, key: str, text: str) -> None:
    await pilot.press(key)
    await settle(pilot, app, lambda: bool(app.screen.query(Input)), refresh=False)
    await pilot.press(*[c if c != " " else "space" for c in text])
    assert app.screen.query_one(Input).value == text
    await pilot.press("enter")


def test_a_running_team_is_shown_and_answered_and_cancelled_from_the_keyboard(
    live_team: LiveTeam,
) -> None:
    check_snapshot_of_a_running_team(read_snapshot(live_team.url))

    async def drive() -> None:
        with tenure.open_store(live_team.url, create=False) as store:
            app = watch_app(store, interval=60)  # refreshed by hand: see settle
            async with app.run_test(size=(160, 50)) as pilot:
                await pilot.pause(0.1)
                tree = app.query_one("#teams", Tree)
                [acme] = tree.root.children
                assert str(acme.label).startswith("acme  leader leader  epoch 1  lease ")
                assert [str(c.label).split()[0] for c in acme.children] == ["research"]

                members = cells(app.query_one("#members", DataTable))
                assert sorted((r[0], r[2], r[3]) for r in members) == [
                    ("acme", "busy", "hold"),
                    ("acme", "idle", "-"),
                    ("acme/research", "dead", "-"),
                    ("acme/research", "left", "-"),
                    ("acme/research", "left", "-"),
                ]
                tasks = {r[1]: r for r in cells(app.query_one("#tasks", DataTable))}
                assert tasks["price"][2:4] == ["blocked", "1/1"]
                assert tasks["hold"][2] == "running" and tasks["survey"][2] == "done"
                inbox = cells(app.query_one("#inbox", DataTable))
                assert [r[1] for r in inbox] == ["price", "quote"]
                assert inbox[0][5].startswith("gave up after 1 attempt:")
                assert MARKUP in inbox[0][5]  # member text shown as written, never as markup

                await type_into_dialog(pilot, app, "a", "EU 4")
                await settle(pilot, app, lambda: [r[1] for r in cells(inbox_of(app))] == ["quote"])
                live_team.wait_until(lambda s: states(s)["price"] == "done")
                [answer] = task(store, "price").data.qa
                assert answer.answer == "EU 4"

                await type_into_dialog(pilot, app, "c", "gone")
                live_team.wait_until(lambda s: states(s)["quote"] == "cancelled")
                assert task(store, "quote").reason == "gone"
                await settle(pilot, app, lambda: cells(inbox_of(app)) == [])
                await pilot.press("q")

    asyncio.run(drive())
    live_team.release()
    assert live_team.process.wait(timeout=20) == 0


def inbox_of(app: WatchApp) -> DataTable[Any]:
    return app.query_one("#inbox", DataTable)


def test_escape_leaves_the_task_waiting_and_a_refusal_is_a_notice(
    finished_url: str, tmp_path: Path
) -> None:
    url = copy_store(finished_url, tmp_path)

    async def drive() -> None:
        with tenure.open_store(url, create=False) as store:
            app = watch_app(store, interval=60)  # refreshed on mount and by `r` only
            async with app.run_test(size=(160, 50), notifications=True) as pilot:
                await pilot.pause(0.1)
                await pilot.press("a")
                await settle(pilot, app, lambda: bool(app.screen.query(Input)), refresh=False)
                await pilot.press("x", "escape")
                await settle(pilot, app, lambda: not app.screen.query(Input), refresh=False)
                price = task(store, "price")
                assert (price.state, price.data.qa) == ("blocked", [])

                tenure.cancel(store, "acme", "price", "behind the view's back")
                await type_into_dialog(pilot, app, "a", "no")  # price is still shown
                await pilot.pause(0.1)
                price = task(store, "price")
                assert (price.state, price.data.qa) == ("cancelled", [])  # refused, not written
                await settle(
                    pilot, app, lambda: "is cancelled, not waiting" in notices(app), refresh=False
                )
                await pilot.press("r")
                await settle(pilot, app, lambda: [r[1] for r in cells(inbox_of(app))] == ["quote"])

    asyncio.run(drive())


def test_the_timer_refreshes_the_view_from_the_store(finished_url: str, tmp_path: Path) -> None:
    url = copy_store(finished_url, tmp_path)

    async def drive() -> None:
        with tenure.open_store(url, create=False) as store:
            app = watch_app(store, interval=0.1)
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.pause(0.2)
                tenure.cancel(store, "acme", "quote", "dropped elsewhere")
                store.append_event("acme", "note", {"said": "[b]hello[/b]"})
                await settle(
                    pilot, app, lambda: "note said=[b]hello[/b]" in feed(app), refresh=False
                )
                await settle(
                    pilot,
                    app,
                    lambda: [r[1] for r in cells(inbox_of(app))] == ["price"],
                    refresh=False,
                )

    asyncio.run(drive())


def copy_store(url: str, into: Path) -> str:
    source = Path(url.removeprefix("sqlite:///"))
    for each in source.parent.glob(source.name + "*"):
        shutil.copy(each, into / each.name)
    return f"sqlite:///{into / source.name}"


def feed(app: WatchApp) -> str:
    return "\n".join(line.text for line in app.query_one("#feed", RichLog).lines)


def task(store: tenure.Store, task_id: str) -> tenure.Task:
    return next(t for t in tenure.tasks(store, "acme") if t.task_id == task_id)


def watch_app(store: Any, *, interval: float) -> WatchApp:
    """The live view over ``store``; its notices stay up until the test has read them (a
    loaded machine can take longer than a notice's few seconds between two steps)."""
    app = WatchApp(Watcher(store), interval=interval)
    app.NOTIFICATION_TIMEOUT = 600
    return app


def notices(app: WatchApp) -> str:
    return " ".join(str(toast.render()) for toast in app.screen.query("Toast"))


# --- the command: one snapshot for a pipe, the live view under tmux ------------------


def tenure_cli(*args: str) -> Any:
    """The command in this process; CliRunner's output is not a terminal, as a pipe."""
    from typer.testing import CliRunner

    from tenure.console.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_a_pipe_gets_one_snapshot_and_json(finished_url: str) -> None:
    shown = tenure_cli("watch", "--store", finished_url)
    assert shown.exit_code == 0, shown.output
    assert "tenure watch" in shown.stdout and "research" in shown.stdout
    for title in ("teams", "members", "inbox", "tasks", "spend", "events"):
        assert f"\n{title}" in shown.stdout
    assert "[red]login[/]" in shown.stdout  # member text printed as written
    as_json = tenure_cli("watch", "--store", finished_url, "--team", "acme", "--json")
    assert as_json.exit_code == 0, as_json.output
    snap = json.loads(as_json.stdout)
    assert [t["team"] for t in snap["teams"]] == ["acme", "acme/research"]
    assert [i["task_id"] for i in snap["inbox"]] == ["price", "quote"]
    assert snap["spend"][0]["limits"] == {"tokens": 1000, "cost_usd": None, "wall_seconds": None}


def test_a_missing_store_is_refused_and_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "state.db"
    result = tenure_cli("watch", "--store", f"sqlite:///{missing}", "--once")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no store at") and len(result.stderr.splitlines()) == 1
    assert not missing.parent.exists()


def test_an_unknown_team_is_refused(finished_url: str) -> None:
    result = tenure_cli("watch", "--store", finished_url, "--team", "nope")
    assert result.exit_code == 1 and "no team 'nope'" in result.stderr


def test_without_textual_a_terminal_gets_the_install_hint(finished_url: str) -> None:
    hide = "import sys; sys.modules['textual'] = None; from tenure.console.cli import main; main()"
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", hide, "watch", "--store", finished_url],
            stdin=follower,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 1
    assert "pip install 'tenure[tui]'" in done.stderr and "Traceback" not in done.stderr


def test_under_tmux_a_person_sees_the_view_and_q_quits(finished_url: str, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        message = "tmux is not installed (apt-get install tmux): the terminal test cannot run"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    socket = f"tenure-watch-{uuid.uuid4().hex[:8]}"
    status = tmp_path / "status"
    command = (
        f"{shlex.quote(sys.executable)} -m tenure watch --store {shlex.quote(finished_url)} "
        f"--interval 0.2; echo $? > {shlex.quote(str(status))}"
    )
    tmux = ["tmux", "-L", socket]
    subprocess.run([*tmux, "new-session", "-d", "-x", "160", "-y", "45", command], check=True)
    try:
        expected = ("tenure watch", "acme", "research", "vacant", "price", "blocked", "events")
        screen = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(e in screen for e in expected):
            time.sleep(0.1)
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True
            ).stdout
        for each in expected:
            assert each in screen, f"{each!r} not on the screen:\n{screen}"
        subprocess.run([*tmux, "send-keys", "q"], check=True)
        deadline = time.monotonic() + 15
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.read_text().strip() == "0"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
