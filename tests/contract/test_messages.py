"""Message log: at-least-once delivery with a visibility timeout, acks, dead letters."""

from __future__ import annotations

import pytest

from tenure.protocol.errors import ProtocolError
from tenure.store import Store

from ._support import OTHER_TEAM, SHORT_TTL, TEAM, wait_out

Q = "inbox"
LONG = 30.0


def test_send_then_receive_delivers_the_payload(store: Store) -> None:
    payload = {"type": "task.assign", "body": {"task_id": "t1", "n": [1, 2]}, "epoch": 1}
    before = store.now()
    message_id = store.send(TEAM, Q, payload)
    after = store.now()
    assert isinstance(message_id, str)
    assert message_id
    [delivery] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG)
    assert delivery.message_id == message_id
    assert delivery.queue == Q
    assert delivery.payload == payload
    assert delivery.delivery_count == 1
    assert before <= delivery.sent_at <= after


def test_message_ids_are_unique(store: Store) -> None:
    ids = {store.send(TEAM, Q, {"i": i}) for i in range(20)}
    assert len(ids) == 20


def test_receive_on_an_empty_queue_returns_nothing(store: Store) -> None:
    assert store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG) == []


def test_a_delivered_message_is_invisible_within_the_timeout(store: Store) -> None:
    store.send(TEAM, Q, {"i": 1})
    assert len(store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG)) == 1
    assert store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG) == []
    assert store.receive(TEAM, Q, consumer="c2", visibility_timeout=LONG) == []


def test_unacked_message_is_redelivered_after_the_visibility_timeout(store: Store) -> None:
    message_id = store.send(TEAM, Q, {"i": 1})
    [first] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=SHORT_TTL)
    assert first.delivery_count == 1
    wait_out()
    [second] = store.receive(TEAM, Q, consumer="c2", visibility_timeout=SHORT_TTL)
    assert second.message_id == message_id
    assert second.payload == {"i": 1}
    assert second.delivery_count == 2
    assert second.sent_at == pytest.approx(first.sent_at)


def test_acked_message_never_comes_back(store: Store) -> None:
    message_id = store.send(TEAM, Q, {"i": 1})
    [delivery] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=SHORT_TTL)
    assert store.ack(TEAM, Q, delivery.message_id) is True
    wait_out()
    assert store.receive(TEAM, Q, consumer="c1", visibility_timeout=SHORT_TTL) == []
    assert store.ack(TEAM, Q, message_id) is False
    assert store.dead_letters(TEAM, Q) == []


def test_ack_of_unknown_message_returns_false(store: Store) -> None:
    assert store.ack(TEAM, Q, "01J0000000000000000000000X") is False
    message_id = store.send(TEAM, Q, {"i": 1})
    # The id is only known in its own team and queue.
    assert store.ack(TEAM, "other-queue", message_id) is False
    assert store.ack(OTHER_TEAM, Q, message_id) is False
    assert len(store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG)) == 1


def test_ack_after_redelivery_settles_the_message(store: Store) -> None:
    store.send(TEAM, Q, {"i": 1})
    store.receive(TEAM, Q, consumer="c1", visibility_timeout=SHORT_TTL)
    wait_out()
    [again] = store.receive(TEAM, Q, consumer="c2", visibility_timeout=SHORT_TTL)
    assert store.ack(TEAM, Q, again.message_id) is True
    wait_out()
    assert store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG) == []


def test_queue_is_fifo(store: Store) -> None:
    sent = [store.send(TEAM, Q, {"i": i}) for i in range(10)]
    got = [
        d.message_id
        for _ in range(10)
        for d in store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG)
    ]
    assert got == sent


def test_batch_receive_is_fifo_too(store: Store) -> None:
    sent = [store.send(TEAM, Q, {"i": i}) for i in range(7)]
    batch = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_messages=5)
    rest = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_messages=5)
    assert [d.message_id for d in batch + rest] == sent


def test_max_messages_is_honoured(store: Store) -> None:
    for i in range(5):
        store.send(TEAM, Q, {"i": i})
    assert len(store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG)) == 1
    assert len(store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_messages=3)) == 3
    assert len(store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_messages=3)) == 1


def test_queues_are_isolated(store: Store) -> None:
    a = store.send(TEAM, "a", {"q": "a"})
    b = store.send(TEAM, "b", {"q": "b"})
    [got_b] = store.receive(TEAM, "b", consumer="c1", visibility_timeout=LONG, max_messages=5)
    assert got_b.message_id == b
    assert got_b.queue == "b"
    [got_a] = store.receive(TEAM, "a", consumer="c1", visibility_timeout=LONG, max_messages=5)
    assert got_a.message_id == a


def test_teams_are_isolated(store: Store) -> None:
    mine = store.send(TEAM, Q, {"team": "a"})
    assert store.receive(OTHER_TEAM, Q, consumer="c1", visibility_timeout=LONG) == []
    theirs = store.send(OTHER_TEAM, Q, {"team": "b"})
    [got] = store.receive(OTHER_TEAM, Q, consumer="c1", visibility_timeout=LONG, max_messages=5)
    assert got.message_id == theirs
    [got] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_messages=5)
    assert got.message_id == mine


def test_two_consumers_never_hold_the_same_message_within_visibility(store: Store) -> None:
    sent = {store.send(TEAM, Q, {"i": i}) for i in range(12)}
    held: dict[str, str] = {}
    for _ in range(10):
        for consumer in ("c1", "c2"):
            for d in store.receive(
                TEAM, Q, consumer=consumer, visibility_timeout=LONG, max_messages=2
            ):
                assert d.message_id not in held, f"{d.message_id} delivered twice"
                held[d.message_id] = consumer
    assert set(held) == sent
    assert set(held.values()) == {"c1", "c2"}


def test_message_is_dead_lettered_after_max_deliveries(store: Store) -> None:
    message_id = store.send(TEAM, Q, {"poison": True})
    keep = store.send(TEAM, Q, {"poison": False})
    store.ack(TEAM, Q, keep)
    counts = []
    for _ in range(2):
        [d] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=0.05, max_deliveries=2)
        counts.append(d.delivery_count)
        wait_out(0.05, 0.05)
    assert counts == [1, 2]
    # Delivered max_deliveries times already: given up on, not delivered again.
    assert store.receive(TEAM, Q, consumer="c1", visibility_timeout=0.05, max_deliveries=2) == []
    [dead] = store.dead_letters(TEAM, Q)
    assert dead.message_id == message_id
    assert dead.payload == {"poison": True}
    assert dead.queue == Q
    assert dead.delivery_count == 2
    assert store.dead_letters(TEAM) == [dead]
    assert store.dead_letters(TEAM, "other-queue") == []
    wait_out(0.05, 0.05)
    assert store.receive(TEAM, Q, consumer="c1", visibility_timeout=0.05, max_deliveries=9) == []
    dead_events = [e for e in store.events(TEAM) if e.kind == "message.dead_lettered"]
    assert len(dead_events) == 1
    assert message_id in dead_events[0].data.values()


def test_dead_lettering_does_not_stop_later_messages(store: Store) -> None:
    poison = store.send(TEAM, Q, {"i": 0})
    store.receive(TEAM, Q, consumer="c1", visibility_timeout=0.05, max_deliveries=1)
    good = store.send(TEAM, Q, {"i": 1})
    wait_out(0.05, 0.05)
    [d] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_deliveries=1)
    assert d.message_id == good
    assert [x.message_id for x in store.dead_letters(TEAM, Q)] == [poison]


def test_many_dead_letters_ahead_do_not_hide_a_deliverable_message(store: Store) -> None:
    poison = [store.send(TEAM, Q, {"i": i}) for i in range(9)]
    got = store.receive(TEAM, Q, consumer="c1", visibility_timeout=0.05, max_messages=9)
    assert len(got) == 9
    good = store.send(TEAM, Q, {"good": True})
    wait_out(0.05, 0.05)
    # One call gives up on all nine and still delivers the good message behind them.
    [d] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_deliveries=1)
    assert d.message_id == good
    assert [x.message_id for x in store.dead_letters(TEAM, Q)] == poison


def test_dead_letters_span_queues_when_no_queue_is_named(store: Store) -> None:
    for queue in ("a", "b"):
        store.send(TEAM, queue, {"q": queue})
        store.receive(TEAM, queue, consumer="c1", visibility_timeout=0.05, max_deliveries=1)
    wait_out(0.05, 0.05)
    for queue in ("a", "b"):
        assert (
            store.receive(TEAM, queue, consumer="c1", visibility_timeout=0.05, max_deliveries=1)
            == []
        )
    assert sorted(d.queue for d in store.dead_letters(TEAM)) == ["a", "b"]
    assert [d.queue for d in store.dead_letters(TEAM, "a")] == ["a"]
    assert store.dead_letters(OTHER_TEAM) == []


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_non_positive_visibility_timeout_raises_protocol_error(
    store: Store, timeout: float
) -> None:
    store.send(TEAM, Q, {"i": 1})
    with pytest.raises(ProtocolError) as caught:
        store.receive(TEAM, Q, consumer="c1", visibility_timeout=timeout)
    assert caught.value.field == "visibility_timeout"
    assert len(store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG)) == 1


def test_drop_dead_letters_deletes_only_the_dead_of_that_queue(store: Store) -> None:
    poison = {queue: store.send(TEAM, queue, {"poison": queue}) for queue in (Q, "other")}
    for queue in (Q, "other"):
        store.receive(TEAM, queue, consumer="c1", visibility_timeout=0.05, max_deliveries=1)
    wait_out(0.05, 0.05)
    live = store.send(TEAM, Q, {"poison": False})
    # the next receive gives each poison message up and hands out the live one
    [d] = store.receive(TEAM, Q, consumer="c1", visibility_timeout=LONG, max_deliveries=1)
    assert d.message_id == live
    assert (
        store.receive(TEAM, "other", consumer="c1", visibility_timeout=LONG, max_deliveries=1) == []
    )
    assert sorted(x.message_id for x in store.dead_letters(TEAM)) == sorted(poison.values())
    assert store.drop_dead_letters(TEAM, "other") == 1
    assert [x.message_id for x in store.dead_letters(TEAM)] == [poison[Q]]
    assert store.drop_dead_letters(TEAM) == 1
    assert store.dead_letters(TEAM) == []
    assert store.drop_dead_letters(TEAM) == 0
    assert store.ack(TEAM, Q, live) is True  # a live message is untouched


# --- a hold is tied to its holder's liveness ------------------------------------------------


def test_a_message_held_by_a_member_comes_back_once_its_heartbeat_lapses(store: Store) -> None:
    """Not after the visibility timeout: the member it was delivered to is gone."""
    message_id = store.send(TEAM, Q, {"i": 1})
    store.join(TEAM, "w1", ttl=SHORT_TTL, incarnation="a")
    store.join(TEAM, "w2", ttl=LONG, incarnation="b")
    [held] = store.receive(TEAM, Q, consumer="w1", visibility_timeout=LONG)
    assert store.receive(TEAM, Q, consumer="w2", visibility_timeout=LONG) == []
    wait_out()
    [back] = store.receive(TEAM, Q, consumer="w2", visibility_timeout=LONG)
    assert (back.message_id, back.delivery_count) == (held.message_id, 2) == (message_id, 2)
    # and now w2 holds it, live: nobody else gets it
    assert store.receive(TEAM, Q, consumer="w3", visibility_timeout=LONG) == []


def test_a_message_held_by_a_member_that_left_comes_back_at_once(store: Store) -> None:
    store.send(TEAM, Q, {"i": 1})
    store.join(TEAM, "w1", ttl=LONG, incarnation="a")
    store.receive(TEAM, Q, consumer="w1", visibility_timeout=LONG)
    store.leave(TEAM, "w1")
    assert len(store.receive(TEAM, Q, consumer="w2", visibility_timeout=LONG)) == 1


def test_a_message_held_by_a_replaced_incarnation_comes_back(store: Store) -> None:
    """The id restarted under a new incarnation: what the old one held is not its own."""
    store.send(TEAM, Q, {"i": 1})
    store.join(TEAM, "w1", ttl=SHORT_TTL, incarnation="old")
    store.receive(TEAM, Q, consumer="w1", visibility_timeout=LONG)
    wait_out()
    store.join(TEAM, "w1", ttl=LONG, incarnation="new")
    [again] = store.receive(TEAM, Q, consumer="w1", visibility_timeout=LONG)
    assert again.delivery_count == 2


def test_a_message_held_by_a_live_member_stays_invisible(store: Store) -> None:
    store.send(TEAM, Q, {"i": 1})
    store.join(TEAM, "w1", ttl=LONG, incarnation="a")
    store.receive(TEAM, Q, consumer="w1", visibility_timeout=LONG)
    store.heartbeat(TEAM, "w1", ttl=LONG, incarnation="a")
    assert store.receive(TEAM, Q, consumer="w2", visibility_timeout=LONG) == []


def test_a_message_held_by_a_non_member_keeps_its_visibility_timeout(store: Store) -> None:
    store.send(TEAM, Q, {"i": 1})
    store.receive(TEAM, Q, consumer="not-a-member", visibility_timeout=LONG)
    assert store.receive(TEAM, Q, consumer="c2", visibility_timeout=LONG) == []


def test_an_acked_message_of_a_lapsed_member_never_comes_back(store: Store) -> None:
    message_id = store.send(TEAM, Q, {"i": 1})
    store.join(TEAM, "w1", ttl=SHORT_TTL, incarnation="a")
    store.receive(TEAM, Q, consumer="w1", visibility_timeout=LONG)
    assert store.ack(TEAM, Q, message_id)
    wait_out()
    assert store.receive(TEAM, Q, consumer="w2", visibility_timeout=LONG) == []
