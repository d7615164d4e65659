"""Sizes and shapes at the store boundary, on every backend: what is too large or too
deep is refused before anything is written; what cannot be decoded is still counted,
handed over with the reason, and dead-lettered; a batch of tasks lands whole."""

from __future__ import annotations

import pytest

from conftest import LEASE_TOKEN
from poison import POISONS, inject, inject_event
from tenure.protocol.errors import ProtocolError, StaleEpoch
from tenure.protocol.limits import MAX_EVENT_BYTES, MAX_JSON_DEPTH, MAX_MESSAGE_BYTES
from tenure.store import Store

from ._support import TEAM, kinds

Q = "sizes"


def nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def lead(store: Store) -> int:
    return store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch


# --- going in -------------------------------------------------------------------------


def test_a_payload_over_the_message_limit_is_refused_and_nothing_is_written(
    store: Store,
) -> None:
    before = kinds(store)
    with pytest.raises(ProtocolError) as caught:
        store.send(TEAM, Q, {"pad": "x" * MAX_MESSAGE_BYTES})
    assert caught.value.field == "payload"
    assert f"the limit is {MAX_MESSAGE_BYTES:,}" in str(caught.value)
    assert kinds(store) == before
    assert store.receive(TEAM, Q, consumer="c", visibility_timeout=1.0) == []


def test_the_message_limit_counts_utf8_bytes_not_stored_escapes(store: Store) -> None:
    """``é`` is two bytes on the wire (six as a stored ``\\u00e9``): the limit is the wire's."""
    message_id = store.send(TEAM, Q, {"pad": "é" * (MAX_MESSAGE_BYTES // 2 - 20)})
    [got] = store.receive(TEAM, Q, consumer="c", visibility_timeout=1.0)
    assert got.message_id == message_id and got.problem is None


def test_a_payload_nested_too_deep_is_refused_before_it_is_written(store: Store) -> None:
    store.send(TEAM, Q, nested(MAX_JSON_DEPTH))  # at the limit: fine
    with pytest.raises(ProtocolError) as caught:
        store.send(TEAM, Q, nested(MAX_JSON_DEPTH + 1))
    assert caught.value.field == "payload"
    assert len(store.receive(TEAM, Q, consumer="c", visibility_timeout=1.0, max_messages=5)) == 1


def test_event_data_over_its_limit_is_refused(store: Store) -> None:
    before = kinds(store)
    with pytest.raises(ProtocolError) as caught:
        store.append_event(TEAM, "note", {"pad": "x" * MAX_EVENT_BYTES})
    assert caught.value.field == "data"
    with pytest.raises(ProtocolError):
        store.append_event(TEAM, "note", nested(10_000))
    assert kinds(store) == before


# --- coming out -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(POISONS))
def test_an_undecodable_payload_is_counted_handed_over_and_dead_lettered(
    store: Store, kind: str
) -> None:
    poison = inject(store, TEAM, Q, POISONS[kind])
    counts = []
    for _ in range(3):
        [bad] = store.receive(TEAM, Q, consumer="c", visibility_timeout=30.0, max_deliveries=3)
        assert (bad.message_id, bad.payload) == (poison, {})
        assert bad.problem and "\n" not in bad.problem
        counts.append(bad.delivery_count)
        assert store.release(TEAM, Q, poison)
    assert counts == [1, 2, 3]
    good = store.send(TEAM, Q, {"fine": True})
    [after] = store.receive(TEAM, Q, consumer="c", visibility_timeout=30.0, max_deliveries=3)
    assert (after.message_id, after.payload, after.problem) == (good, {"fine": True}, None)
    [dead] = store.dead_letters(TEAM, Q)
    assert (dead.message_id, dead.payload, dead.delivery_count) == (poison, {}, 3)
    assert dead.problem
    assert "message.dead_lettered" in kinds(store)


def test_a_redis_entry_without_a_payload_field_is_handed_over_with_the_reason(
    store: Store,
) -> None:
    from tenure.store.redis.backend import RedisStore

    if not isinstance(store, RedisStore):
        pytest.skip("a stream entry's fields are a Redis detail")
    first = store.send(TEAM, Q, {"seed": True})
    store.ack(TEAM, Q, first)
    odd = first.split("-", 1)[0] + "-1"
    store.client.xadd(store.keys.team(TEAM, f"q:{Q}"), {"x": "1"}, id=odd)
    after = store.send(TEAM, Q, {"fine": True})
    got = store.receive(TEAM, Q, consumer="c", visibility_timeout=30.0, max_messages=5)
    assert [(d.message_id, d.payload, bool(d.problem)) for d in got] == [
        (odd, {}, True),
        (after, {"fine": True}, False),
    ]


def test_release_makes_a_delivery_visible_at_once_and_keeps_its_count(store: Store) -> None:
    message_id = store.send(TEAM, Q, {"n": 1})
    [first] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=60.0)
    assert store.receive(TEAM, Q, consumer="c2", visibility_timeout=60.0) == []
    assert store.release(TEAM, Q, message_id) is True
    [again] = store.receive(TEAM, Q, consumer="c2", visibility_timeout=60.0)
    assert (again.message_id, again.delivery_count) == (message_id, first.delivery_count + 1)
    assert store.ack(TEAM, Q, message_id)
    assert store.release(TEAM, Q, message_id) is False  # acked: nothing to give back
    assert store.release(TEAM, Q, "01JP9Y3DNGERP29J7QSMEVH7WJ") is False
    never = store.send(TEAM, Q, {"n": 2})
    assert store.release(TEAM, Q, never) is False  # never delivered: nothing to give back


@pytest.mark.parametrize("kind", ["deep", "garbage", "list"])
def test_an_undecodable_event_reads_as_its_problem_and_the_log_goes_on(
    store: Store, kind: str
) -> None:
    inject_event(store, TEAM, POISONS[kind])
    store.append_event(TEAM, "after", {"n": 1})
    found = store.events(TEAM)
    assert [e.data for e in found if e.kind == "after"] == [{"n": 1}]
    odd = [e.data for e in found if e.kind not in ("after", "seed") or e.data.get("problem")]
    assert odd and all(set(d) == {"problem"} and "\n" not in d["problem"] for d in odd), odd


# --- a batch of tasks -----------------------------------------------------------------


def test_create_tasks_registers_every_free_id_in_order(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "b", epoch=epoch, spec={"goal": "already here"})
    made = store.create_tasks(
        TEAM, [("a", {"goal": "A"}), ("b", {"goal": "B"}), ("c", {"goal": "C"})], epoch=epoch
    )
    assert [(t.task_id, t.spec["goal"], t.state) for t in made] == [
        ("a", "A", "queued"),
        ("c", "C", "queued"),
    ]
    assert [t.task_id for t in store.tasks(TEAM)] == ["b", "a", "c"]
    assert store.get_task(TEAM, "b").spec == {"goal": "already here"}
    assert kinds(store).count("task.created") == 3
    assert store.create_tasks(TEAM, [], epoch=epoch) == []


def test_create_tasks_at_a_stale_epoch_registers_none(store: Store) -> None:
    old = lead(store)
    store.release_lease(TEAM, "leader", old, token=LEASE_TOKEN)
    lead(store)
    with pytest.raises(StaleEpoch):
        store.create_tasks(TEAM, [("a", {"goal": "A"}), ("b", {"goal": "B"})], epoch=old)
    assert store.tasks(TEAM) == []
