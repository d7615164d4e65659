"""``tenure trim``: a team's old events go, on request; the register and newer events stay."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from test_cli_team import tenure

from conftest import LEASE_TOKEN
from tenure.console.trim_cmds import seconds_of
from tenure.store import open_store

TEAM = "pricing"


@pytest.fixture
def aged_store(tmp_path: Path) -> str:
    """A SQLite store with 5 events a day old and 2 fresh ones, and one task."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        epoch = store.claim_lease(TEAM, "lead", 30.0, token=LEASE_TOKEN).epoch
        store.create_task(TEAM, "t1", epoch=epoch, spec={})
        for i in range(3):
            store.append_event(TEAM, "old", {"i": i})
        store.append_event("other", "old", {})
        old = store.last_event_seq(TEAM)
    with closing(sqlite3.connect(tmp_path / "state.db")) as db:  # ages them by a day
        db.execute("UPDATE events SET at = at - 86400")
        db.commit()
    with open_store(url) as store:
        store.append_event(TEAM, "new", {"i": 1})
        store.append_event(TEAM, "new", {"i": 2})
        assert store.last_event_seq(TEAM) > old
    return url


def kinds(url: str, team: str) -> list[str]:
    with open_store(url) as store:
        return [e.kind for e in store.events(team)]


def test_without_yes_it_only_counts(aged_store: str, tmp_path: Path) -> None:
    before = kinds(aged_store, TEAM)
    done = tenure(tmp_path, "trim", "--team", TEAM, "--older-than", "12h", "--store", aged_store)
    assert done.returncode == 0, done.stderr
    assert f"{len(before) - 2} event(s) of {TEAM} are older than 12h" in done.stdout
    assert kinds(aged_store, TEAM) == before


def test_with_yes_old_events_go_and_the_rest_stays(aged_store: str, tmp_path: Path) -> None:
    args = ("trim", "-t", TEAM, "--older-than", "12h", "--store", aged_store, "--yes")
    done = tenure(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "trimmed 5 event(s)" in done.stdout  # lease claim, task created, 3 old
    assert kinds(aged_store, TEAM) == ["new", "new"]
    assert kinds(aged_store, "other") == ["old"]  # another team's log is its own
    with open_store(aged_store) as store:
        assert store.get_task(TEAM, "t1").state == "queued"
        assert store.current_lease(TEAM) is not None


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (("--older-than", "10s"), "--older-than: at least 60s", 2),  # a flag: usage error
        (("--older-than", "a week"), "--older-than: a duration like 90s", 2),
        (("--older-than", "1d", "-t", "nobody"), "no team 'nobody' in ", 1),
    ],
)
def test_bad_input_is_one_line_and_deletes_nothing(
    aged_store: str, tmp_path: Path, args: tuple[str, ...], message: str, status: int
) -> None:
    before = kinds(aged_store, TEAM)
    team = () if "-t" in args else ("-t", TEAM)
    done = tenure(tmp_path, "trim", *team, *args, "--store", aged_store, "--yes")
    assert done.returncode == status
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert kinds(aged_store, TEAM) == before


def test_durations() -> None:
    assert [seconds_of(t) for t in ("90", "90s", "30m", "1.5h", "7d")] == [
        90,
        90,
        1800,
        5400,
        604800,
    ]


@pytest.fixture
def poisoned_store(tmp_path: Path) -> str:
    """A SQLite store whose team gave up on one message of each of two queues."""
    url = f"sqlite:///{tmp_path / 'dead.db'}"
    with open_store(url) as store:
        for queue in ("leader", "member:w1"):
            store.send(TEAM, queue, {"type": "task.result", "poison": queue})
            store.receive(TEAM, queue, consumer="c", visibility_timeout=0.01, max_deliveries=1)
        time.sleep(0.05)
        for queue in ("leader", "member:w1"):
            assert (
                store.receive(TEAM, queue, consumer="c", visibility_timeout=5, max_deliveries=1)
                == []
            )
        assert len(store.dead_letters(TEAM)) == 2
    return url


def test_dead_letters_are_listed_then_dropped_only_with_yes(
    poisoned_store: str, tmp_path: Path
) -> None:
    listed = tenure(tmp_path, "dead-letters", "-t", TEAM, "--store", poisoned_store)
    assert listed.returncode == 0, listed.stderr
    assert "dead letters of pricing" in listed.stdout
    assert '"poison": "leader"' in listed.stdout and "member:w1" in listed.stdout
    asked = tenure(tmp_path, "dead-letters", "-t", TEAM, "--store", poisoned_store, "--drop")
    assert "add --yes to delete these 2 dead letter(s)" in asked.stdout
    one = ("dead-letters", "-t", TEAM, "--store", poisoned_store, "--queue", "leader")
    dropped = tenure(tmp_path, *one, "--drop", "--yes")
    assert "dropped 1 dead letter(s) of pricing" in dropped.stdout, dropped.stderr
    with open_store(poisoned_store) as store:
        assert [d.queue for d in store.dead_letters(TEAM)] == ["member:w1"]
    empty = tenure(tmp_path, *one)
    assert "no dead letters in pricing queue leader" in empty.stdout
