"""A member's store (``PatientStore``) on real backends: an outage is waited out and
said, a write of unknown outcome is raised once the store is back, patience runs out,
and a store replaced under its members is noticed — SQLite files and Redis alike."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from conftest import PrivateRedis, redis_or_skip, wipe_redis
from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.protocol.errors import ConfigError, LeaseLost, StoreLost, StoreUnreachable
from tenure.store import Store, open_store
from tenure.store.patient import OUTAGE_EVENT, PATIENCE_VAR, PatientStore, patience_from_env
from tenure.store.sqlite import connection

TEAM = "outage"


class Said:
    """What a member would print on stderr, and whether it was told the store is lost."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lost: list[str] = []


def patient(store: Store, said: Said, **kw: float) -> PatientStore:
    return PatientStore(
        store, team=TEAM, member="m1", say=said.lines.append, on_lost=said.lost.append, **kw
    )


class Stores:
    """Every store a test opens, closed when it ends (a store left open is a leak)."""

    def __init__(self) -> None:
        self.opened: list[Store] = []

    def open(self, url: str) -> Store:
        store = open_store(url)
        self.opened.append(store)
        return store


@pytest.fixture
def stores() -> Iterator[Stores]:
    kept = Stores()
    yield kept
    for store in kept.opened:
        store.close()


@pytest.fixture
def paused_redis(private_redis: PrivateRedis) -> Iterator[PrivateRedis]:
    yield private_redis
    private_redis.resume()  # whatever the test did


def _resume_after(server: PrivateRedis, seconds: float) -> threading.Thread:
    timer = threading.Timer(seconds, server.resume)
    timer.start()
    return timer


def test_a_read_waits_out_a_paused_redis_and_the_outage_is_logged(
    paused_redis: PrivateRedis,
    stores: Stores,
) -> None:
    said = Said()
    store = patient(stores.open(paused_redis.url), said)
    store.create_task(TEAM, "t1", epoch=0, spec={})
    paused_redis.pause()
    resumed_at: list[float] = []
    timer = threading.Timer(3.0, lambda: (resumed_at.append(time.time()), paused_redis.resume()))
    timer.start()
    tasks = store.tasks(TEAM)  # fails for 3 s, then answers
    assert [t.task_id for t in tasks] == ["t1"]
    assert len(said.lines) == 2, said.lines
    assert said.lines[0].startswith("store unreachable since ")
    assert said.lines[0].endswith("waiting; Ctrl-C to stop") and "127.0.0.1" in said.lines[0]
    assert said.lines[1].startswith("store reachable again at ")
    (event,) = [e for e in store.events(TEAM) if e.kind == OUTAGE_EVENT]
    assert event.data["member"] == "m1"
    assert event.data["start"] < resumed_at[0] <= event.data["end"]
    assert event.data["seconds"] == pytest.approx(event.data["end"] - event.data["start"], abs=0.01)
    assert said.lost == []


def test_a_write_whose_reply_was_lost_is_raised_once_the_store_answers(
    paused_redis: PrivateRedis,
    stores: Stores,
) -> None:
    said = Said()
    store = patient(stores.open(paused_redis.url), said)
    paused_redis.pause()
    resumed: list[float] = []
    timer = threading.Timer(2.5, lambda: (resumed.append(time.monotonic()), paused_redis.resume()))
    timer.start()
    with pytest.raises(StoreUnreachable, match="whether that write was made is unknown"):
        store.send(TEAM, "q", {"n": 1})
    assert resumed and time.monotonic() >= resumed[0]  # not before the store was back
    timer.join()
    assert [line.split(" ")[1] for line in said.lines] == ["unreachable", "reachable"]
    # at most once: the server may have run the write it had buffered, the member never twice
    delivered = store.receive(TEAM, "q", consumer="c", visibility_timeout=5, max_messages=5)
    assert len(delivered) <= 1


def test_past_its_patience_a_member_gives_up_with_store_lost(
    paused_redis: PrivateRedis, stores: Stores
) -> None:
    said = Said()
    store = patient(stores.open(paused_redis.url), said, patience=1.5)
    store.members(TEAM)
    paused_redis.pause()
    with pytest.raises(StoreLost, match=r"unreachable for \d+s .*gave up \(patience 1.5s"):
        store.members(TEAM)
    assert len(said.lost) == 1
    paused_redis.resume()
    with pytest.raises(StoreLost):  # and stays lost: a member stops, it does not resume
        store.members(TEAM)


def test_a_stopping_member_waits_for_nothing(paused_redis: PrivateRedis, stores: Stores) -> None:
    stop = threading.Event()
    store = PatientStore(stores.open(paused_redis.url), team=TEAM, member="m1", stop=stop)
    store.members(TEAM)
    paused_redis.pause()
    threading.Timer(1.5, stop.set).start()
    with pytest.raises(StoreUnreachable):
        store.members(TEAM)


def test_a_leader_that_could_not_renew_through_a_stall_is_not_leader_after_it(
    paused_redis: PrivateRedis,
    stores: Stores,
) -> None:
    store = patient(stores.open(paused_redis.url), Said())
    keeper = LeaseKeeper(store, TEAM, "L1", LeaseTiming(ttl=1.0))
    lease = keeper.claim()
    paused_redis.pause()
    _resume_after(paused_redis, 3.5)  # 3.5 TTLs
    assert keeper.renew() is False  # answered after the stall: the lease had expired
    assert not keeper.valid()
    with pytest.raises(LeaseLost):
        keeper.check()
    again = keeper.claim(at_least=lease.epoch)  # it campaigns again, above its old epoch
    assert again.epoch > lease.epoch


def test_a_sqlite_lock_held_too_long_is_waited_out(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, stores: Stores
) -> None:
    monkeypatch.setattr(connection, "LOCK_RETRY_SECONDS", 0.2)  # give up on a lock sooner
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 50)
    said = Said()
    store = patient(stores.open(sqlite_url), said)
    store.join(TEAM, "m1", ttl=30)
    holder = sqlite3.connect(
        sqlite_url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
    )
    holder.execute("PRAGMA busy_timeout = 0")
    holder.execute("BEGIN IMMEDIATE")  # another process inside a write, for 1.5 s
    timer = threading.Timer(1.5, lambda: holder.execute("COMMIT"))
    timer.start()
    member = store.heartbeat(TEAM, "m1", ttl=30)
    timer.join()
    holder.close()
    assert member.member_id == "m1"
    assert [line.split(" since ")[0] for line in said.lines[:1]] == ["store unreachable"]
    assert any(e.kind == OUTAGE_EVENT for e in store.events(TEAM))


# --- a store replaced under its members -----------------------------------------------


def _sqlite(tmp_path: Path, stores: Stores) -> tuple[Path, Store]:
    path = tmp_path / "state.db"
    store = stores.open(f"sqlite:///{path}")
    store.create_task(TEAM, "t1", epoch=0, spec={})
    return path, store


def test_a_fresh_store_is_its_own(tmp_path: Path, stores: Stores) -> None:
    _, store = _sqlite(tmp_path, stores)
    assert store.lost_reason() is None
    assert stores.open(f"sqlite:///{tmp_path / 'state.db'}").lost_reason() is None


@pytest.mark.parametrize(
    ("how", "said"),
    [("delete", "was deleted"), ("truncate", "was truncated"), ("replace", "replaced by another")],
)
def test_a_sqlite_file_lost_under_a_member_is_noticed(
    tmp_path: Path, how: str, said: str, stores: Stores
) -> None:
    path, store = _sqlite(tmp_path, stores)
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        os.truncate(path, 0)
    else:
        stores.open(f"sqlite:///{tmp_path / 'other.db'}").close()
        os.replace(tmp_path / "other.db", path)
    reason = store.lost_reason()
    assert reason is not None and said in reason and str(path) in reason


def test_a_sqlite_file_overwritten_in_place_is_noticed(tmp_path: Path, stores: Stores) -> None:
    """The same inode with another database's bytes (``cp other.db state.db``)."""
    path, store = _sqlite(tmp_path, stores)
    other = tmp_path / "other.db"
    made = stores.open(f"sqlite:///{other}")
    made.create_task(TEAM, "x", epoch=0, spec={})
    made.close()
    for companion in ("-wal", "-shm"):
        Path(str(path) + companion).unlink(missing_ok=True)
    path.write_bytes(other.read_bytes())
    assert store.lost_reason() is not None


def test_a_member_stops_on_its_next_call_once_its_file_is_gone(
    tmp_path: Path, stores: Stores
) -> None:
    path, raw = _sqlite(tmp_path, stores)
    said = Said()
    store = patient(raw, said, identity_every=0.0)
    store.tasks(TEAM)
    path.unlink()
    with pytest.raises(StoreLost, match="was deleted; stopping"):
        store.tasks(TEAM)
    assert len(said.lost) == 1
    with pytest.raises(StoreLost):
        store.confirm()


def test_an_emptied_redis_is_noticed(stores: Stores) -> None:
    url = redis_or_skip()
    store = stores.open(url)
    store.create_task(TEAM, "t1", epoch=0, spec={})
    assert store.lost_reason() is None
    assert wipe_redis(url) > 0
    reason = store.lost_reason()
    assert reason is not None and "was emptied" in reason
    # a member that opens the emptied store starts a new one; the old member still sees
    # a stranger
    assert stores.open(url).lost_reason() is None
    reason = store.lost_reason()
    assert reason is not None and "was replaced" in reason


def test_a_redis_restarted_without_its_data_is_noticed(
    private_redis: PrivateRedis, stores: Stores
) -> None:
    said = Said()
    store = patient(stores.open(private_redis.url), said)
    store.create_task(TEAM, "t1", epoch=0, spec={})
    with redis.Redis(port=private_redis.port) as client:
        client.flushall()  # what a restart with no persistence leaves
    with pytest.raises(StoreLost, match="was emptied"):
        store.confirm()


def test_a_bad_patience_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("soon", "0", "-1", "inf", "nan", "1e9"):  # a wait must end
        monkeypatch.setenv(PATIENCE_VAR, bad)
        with pytest.raises(ConfigError, match=f"{PATIENCE_VAR}: a positive number of seconds"):
            patience_from_env()
    monkeypatch.setenv(PATIENCE_VAR, "12.5")
    assert patience_from_env() == 12.5
