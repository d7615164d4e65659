"""send_many: a batch of messages in one atomic step, as if sent one by one."""

from __future__ import annotations

import pytest

from tenure.protocol.errors import ProtocolError
from tenure.protocol.limits import MAX_MESSAGE_BYTES
from tenure.store import Store

from ._support import TEAM, last_seq


def test_a_batch_is_delivered_in_order(store: Store) -> None:
    ids = store.send_many(TEAM, "q", [{"n": i} for i in range(5)])
    assert len(set(ids)) == 5
    got = store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, max_messages=10)
    assert [d.message_id for d in got] == ids
    assert [d.payload for d in got] == [{"n": i} for i in range(5)]
    assert all(d.delivery_count == 1 for d in got)


def test_a_batch_follows_and_precedes_single_sends(store: Store) -> None:
    first = store.send(TEAM, "q", {"n": 0})
    batch = store.send_many(TEAM, "q", [{"n": 1}, {"n": 2}])
    last = store.send(TEAM, "q", {"n": 3})
    got = store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, max_messages=10)
    assert [d.message_id for d in got] == [first, *batch, last]


def test_each_message_of_a_batch_appends_its_event(store: Store) -> None:
    seq = last_seq(store)
    ids = store.send_many(TEAM, "q", [{"type": "task.assign", "epoch": 4}, {"type": "task.cancel"}])
    events = store.events(TEAM, after=seq)
    assert [e.kind for e in events] == ["message.sent", "message.sent"]
    assert [e.data.get("id") for e in events] == ids
    assert [e.data.get("type") for e in events] == ["task.assign", "task.cancel"]
    assert [e.data.get("queue") for e in events] == ["q", "q"]
    assert [e.epoch for e in events] == [4, None]
    assert events[0].seq < events[1].seq


def test_an_empty_batch_sends_nothing(store: Store) -> None:
    seq = last_seq(store)
    assert store.send_many(TEAM, "q", []) == []
    assert store.events(TEAM, after=seq) == []
    assert store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"blob": "x" * (MAX_MESSAGE_BYTES + 1)},
        "not an object",
    ],
)
def test_one_refused_payload_sends_none_of_the_batch(store: Store, bad: object) -> None:
    seq = last_seq(store)
    with pytest.raises(ProtocolError):
        store.send_many(TEAM, "q", [{"n": 1}, bad, {"n": 3}])  # type: ignore[list-item]
    assert store.events(TEAM, after=seq) == []
    assert store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, max_messages=5) == []


def test_a_batch_is_one_queue_of_one_team(store: Store) -> None:
    store.send_many(TEAM, "q", [{"n": 1}])
    assert store.receive(TEAM, "other", consumer="c1", visibility_timeout=5.0) == []
    assert store.receive("team-b", "q", consumer="c1", visibility_timeout=5.0) == []
    assert len(store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0)) == 1


def test_batched_messages_ack_and_dead_letter_like_any(store: Store) -> None:
    keep, drop = store.send_many(TEAM, "q", [{"n": 1}, {"n": 2}])
    got = store.receive(
        TEAM, "q", consumer="c1", visibility_timeout=0.05, max_messages=2, max_deliveries=1
    )
    assert store.ack(TEAM, "q", keep)
    assert {d.message_id for d in got} == {keep, drop}
    store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, max_deliveries=1, wait=0.3)
    assert [d.message_id for d in store.dead_letters(TEAM, "q")] == [drop]
