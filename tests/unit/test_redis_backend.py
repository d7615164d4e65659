"""What only the Redis backend has: key prefixes, URL forms, error translation, its clock.

The shared behaviour is in tests/contract; these tests cover the Redis-specific
surface around it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import LEASE_TOKEN, REDIS_URL, redis_or_skip
from tenure.protocol.errors import ConfigError, LeaseLost, StoreUnavailable
from tenure.store import Store, open_store

redis = pytest.importorskip("redis")
backend = pytest.importorskip("tenure.store.redis")
RedisStore = backend.RedisStore

TEAM = "team-a"


def with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


@pytest.fixture
def redis_url() -> str:
    """An empty store under a key prefix of its own (skipped, or failed in CI,
    without a server)."""
    return redis_or_skip()


@pytest.fixture
def prefix(redis_url: str) -> str:
    return str(backend.connection.parse_url(redis_url).prefix)


@pytest.fixture
def raw(redis_url: str) -> Iterator[Any]:
    """A plain client on the same database, to look at the keys themselves."""
    target = backend.connection.parse_url(redis_url)
    client = redis.Redis.from_url(target.client_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    opened = open_store(redis_url)
    yield opened
    opened.close()


# --- key prefixes ------------------------------------------------------------------------


def test_two_prefixes_on_one_database_do_not_see_each_other(
    redis_url: str, prefix: str, raw: Any
) -> None:
    a = open_store(with_query(redis_url, f"prefix={prefix}-app-a"))
    b = open_store(with_query(redis_url, f"prefix={prefix}-app-b"))
    try:
        lease = a.claim_lease(TEAM, "alice", 30.0, at_least=9, token=LEASE_TOKEN)
        a.join(TEAM, "m1", ttl=30.0)
        a.create_task(TEAM, "t1", epoch=lease.epoch, spec={"who": "a"})
        a.send(TEAM, "inbox", {"who": "a"})
        a.append_event(TEAM, "note", {"who": "a"})

        assert b.current_lease(TEAM) is None
        assert b.current_epoch(TEAM) == 0
        assert b.members(TEAM) == []
        assert b.tasks(TEAM) == []
        assert b.receive(TEAM, "inbox", consumer="c", visibility_timeout=30.0) == []
        assert b.events() == []
        assert b.teams() == []
        # The same names live on independently under the other prefix.
        assert b.claim_lease(TEAM, "bob", 30.0, token=LEASE_TOKEN).epoch == 1
        assert a.current_epoch(TEAM) == 10
        assert len(a.receive(TEAM, "inbox", consumer="c", visibility_timeout=30.0)) == 1
        assert [e.seq for e in b.events()] == [1]
    finally:
        a.close()
        b.close()
    keys = raw.keys(f"{prefix}-*")
    assert keys
    assert all(k.startswith((f"{prefix}-app-a:", f"{prefix}-app-b:")) for k in keys), keys


def test_default_prefix_is_tenure_and_team_is_in_the_key(prefix: str, raw: Any) -> None:
    team = f"org/{prefix}"  # a team of its own: the default prefix is shared by every run
    store = open_store(REDIS_URL)
    try:
        store.claim_lease(team, "alice", 30.0, token=LEASE_TOKEN)
        assert f"tenure:{{{team}}}:team" in raw.keys(f"tenure:{{{team}}}:*")
        assert team in store.teams()
    finally:
        for key in raw.keys(f"tenure:{{{team}}}:*"):
            raw.delete(key)
        raw.srem("tenure:teams", team)
        store.close()


# --- URL forms (no server needed) ----------------------------------------------------------


def test_rediss_url_with_password_db_and_prefix_is_parsed() -> None:
    store = RedisStore.from_url("rediss://:s3cret@cache.example.com:6380/3?prefix=acme")
    kwargs = store.client.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("cache.example.com", 6380, 3)
    assert kwargs["password"] == "s3cret"
    assert store.client.connection_pool.connection_class is redis.SSLConnection
    assert "prefix" not in kwargs
    assert store.prefix == "acme"
    assert store.url == "rediss://:s3cret@cache.example.com:6380/3?prefix=acme"
    assert "s3cret" not in store.safe_url
    assert store.distributed is True
    store.close()


def test_user_and_password_url_and_defaults() -> None:
    store = open_store("redis://ops:pa%3Ass@10.0.0.5/0")
    assert isinstance(store, RedisStore)
    kwargs = store.client.connection_pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"]) == ("ops", "pa:ss")
    assert (kwargs["host"], kwargs.get("port", 6379), kwargs["db"]) == ("10.0.0.5", 6379, 0)
    assert store.client.connection_pool.connection_class is redis.Connection
    assert store.prefix == "tenure"
    assert "pa%3Ass" not in store.safe_url
    assert "ops:***@10.0.0.5" in store.safe_url
    store.close()


def test_other_query_options_still_reach_the_client() -> None:
    store = RedisStore.from_url("redis://localhost:6379/2?socket_timeout=1.5&prefix=x")
    kwargs = store.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 1.5
    assert kwargs["db"] == 2
    assert store.prefix == "x"
    store.close()


def test_unix_socket_url_keeps_its_path() -> None:
    store = RedisStore.from_url("unix:///run/redis/redis.sock?db=2&prefix=x")
    kwargs = store.client.connection_pool.connection_kwargs
    assert (kwargs["path"], kwargs["db"]) == ("/run/redis/redis.sock", 2)
    assert store.prefix == "x"
    store.close()


def test_empty_prefix_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        RedisStore.from_url("redis://localhost:6379/0?prefix=")


# --- errors are translated -----------------------------------------------------------------


def test_closed_port_raises_store_unavailable_not_a_redis_error() -> None:
    store = RedisStore.from_url("redis://:hunter2@127.0.0.1:1/0")
    calls = [
        store.now,
        lambda: store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN),
        lambda: store.current_epoch(TEAM),
        lambda: store.send(TEAM, "q", {"i": 1}),
        lambda: store.receive(TEAM, "q", consumer="c", visibility_timeout=1.0),
        lambda: store.ack(TEAM, "q", "1-0"),
        lambda: store.get_task(TEAM, "t1"),
        lambda: store.events(),
        store.teams,
    ]
    started = time.monotonic()
    for call in calls:
        with pytest.raises(StoreUnavailable) as caught:
            call()
        assert not isinstance(caught.value, redis.RedisError)
        assert "127.0.0.1:1" in str(caught.value)
        assert "hunter2" not in str(caught.value)
    # No silent retry loop: a dead server is reported at once.
    assert time.monotonic() - started < 5.0
    store.close()


def test_a_foreign_key_of_the_wrong_type_is_store_unavailable(
    store: Store, raw: Any, prefix: str
) -> None:
    raw.set(f"{prefix}:{{team-a}}:team", "not a hash")
    with pytest.raises(StoreUnavailable):
        store.current_epoch(TEAM)
    with pytest.raises(StoreUnavailable):
        store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)


def test_scripts_are_reloaded_after_script_flush(store: Store, raw: Any) -> None:
    store.claim_lease(TEAM, "alice", 10.0, token=LEASE_TOKEN)
    raw.script_flush()
    assert store.claim_lease("team-b", "bob", 10.0, token=LEASE_TOKEN).epoch == 1


# --- the lease's holder token ---------------------------------------------------------------


def test_redis_keeps_the_tokens_hash_and_not_the_token(
    store: Store, raw: Any, prefix: str
) -> None:
    lease = store.claim_lease(TEAM, "alice", 30.0, token=LEASE_TOKEN)
    stored = raw.hgetall(f"{prefix}:{{team-a}}:team")
    assert stored["token"] == hashlib.sha1(LEASE_TOKEN.encode()).hexdigest()
    assert LEASE_TOKEN not in json.dumps(stored)
    # the hash read out of Redis is no token: presented as one, it is refused
    with pytest.raises(LeaseLost):
        store.renew_lease(TEAM, "alice", lease.epoch, 30.0, token=stored["token"])
    assert store.release_lease(TEAM, "alice", lease.epoch, token=stored["token"]) is False
    assert store.release_lease(TEAM, "alice", lease.epoch, token=LEASE_TOKEN) is True
    assert "token" not in raw.hgetall(f"{prefix}:{{team-a}}:team")


def test_a_lease_written_before_tokens_can_be_ended_by_nobody(
    store: Store, raw: Any, prefix: str
) -> None:
    """A lease an older Tenure wrote has no token hash: no token renews, proves or
    releases it; it lapses by its TTL and a claim then takes over as usual."""
    now = store.now()
    key = f"{prefix}:{{team-a}}:team"
    old = {"epoch": 4, "holder": "L1", "lease_epoch": 4, "ttl": "1.0"}
    raw.hset(key, mapping={**old, "expires": int((now + 1.0) * 1e6), "claimed": int(now * 1e6)})
    lease = store.current_lease(TEAM)
    assert lease is not None and (lease.holder, lease.epoch) == ("L1", 4)
    for token in (LEASE_TOKEN, "", hashlib.sha1(b"").hexdigest()):
        assert store.release_lease(TEAM, "L1", 4, token=token) is False
        with pytest.raises(LeaseLost):
            store.renew_lease(TEAM, "L1", 4, 30.0, token=token)
        with pytest.raises(LeaseLost):
            store.prove_lease(TEAM, "L1", 4, "cHJvb2Y=", token=token)
    assert store.current_lease(TEAM) == lease
    time.sleep(max(0.0, lease.expires_at - store.now()) + 0.05)
    assert store.claim_lease(TEAM, "L2", 30.0, token=LEASE_TOKEN).epoch == 5


# --- the server's clock ------------------------------------------------------------------------


def test_now_and_ttls_use_the_server_clock(
    store: Store, raw: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seconds, micros = raw.time()
    server = int(seconds) + int(micros) / 1e6
    # A member whose own clock is an hour wrong changes nothing.
    monkeypatch.setattr(time, "time", lambda: server - 3600.0)
    now = store.now()
    assert abs(now - server) < 2.0
    lease = store.claim_lease(TEAM, "alice", 30.0, token=LEASE_TOKEN)
    assert lease.expires_at == pytest.approx(now + 30.0, abs=2.0)
    member = store.join(TEAM, "m1", ttl=10.0)
    assert member.joined_at == pytest.approx(now, abs=2.0)
    [event] = [e for e in store.events(TEAM) if e.kind == "lease.claimed"]
    assert event.at == pytest.approx(now, abs=2.0)
    stored = raw.hget(f"{prefix}:{{team-a}}:team", "expires")
    assert int(stored) / 1e6 == lease.expires_at


# --- message log details ------------------------------------------------------------------------


def test_a_short_timeout_caller_cannot_take_a_message_held_with_a_long_one(store: Store) -> None:
    store.send(TEAM, "q", {"i": 1})
    assert len(store.receive(TEAM, "q", consumer="a", visibility_timeout=60.0)) == 1
    time.sleep(0.1)
    assert store.receive(TEAM, "q", consumer="b", visibility_timeout=0.01) == []


def test_redeliveries_come_back_oldest_first_whatever_their_timeouts(store: Store) -> None:
    sent = [store.send(TEAM, "q", {"i": i}) for i in range(3)]
    store.receive(TEAM, "q", consumer="a", visibility_timeout=0.3)
    store.receive(TEAM, "q", consumer="b", visibility_timeout=0.05)
    time.sleep(0.4)
    batch = store.receive(TEAM, "q", consumer="c", visibility_timeout=30.0, max_messages=3)
    assert [d.message_id for d in batch] == sent
    assert [d.delivery_count for d in batch] == [2, 2, 1]


def test_acked_messages_leave_no_stream_entries_behind(
    store: Store, raw: Any, prefix: str
) -> None:
    ids = [store.send(TEAM, "q", {"i": i}) for i in range(5)]
    for delivery in store.receive(TEAM, "q", consumer="c", visibility_timeout=30.0, max_messages=5):
        assert store.ack(TEAM, "q", delivery.message_id)
    assert raw.xlen(f"{prefix}:{{team-a}}:q:q") == 0
    assert raw.zcard(f"{prefix}:{{team-a}}:qv:q") == 0
    assert store.ack(TEAM, "q", ids[0]) is False
    assert store.ack(TEAM, "q", "not-an-id") is False
