"""A waiting receive: it wakes when a message becomes deliverable, from this thread's
neighbours or another process, and gives up empty once its wait is over, without
bending visibility or dead-lettering."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tenure.protocol.errors import ProtocolError
from tenure.store import Store, open_store

from ._support import TEAM

SENDER = """
import sys, time
from tenure.store import open_store
store = open_store(sys.argv[1])
store.now()  # connected: what follows is only the send
time.sleep(0.2)
sent = time.time()
store.send(sys.argv[2], "q", {"type": "wake"})
print(sent, flush=True)
"""


def test_an_empty_wait_returns_nothing_once_it_is_over(store: Store) -> None:
    started = time.monotonic()
    assert store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, wait=0.3) == []
    assert 0.28 <= time.monotonic() - started < 2.0


def test_no_wait_returns_at_once(store: Store) -> None:
    started = time.monotonic()
    assert store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0) == []
    assert time.monotonic() - started < 0.25


def test_a_message_already_there_is_delivered_without_waiting(store: Store) -> None:
    store.send(TEAM, "q", {"n": 1})
    started = time.monotonic()
    [got] = store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, wait=10.0)
    assert got.payload == {"n": 1}
    assert time.monotonic() - started < 1.0


def test_a_send_from_another_thread_wakes_the_wait(store: Store, store_url: str) -> None:
    sent_at: list[float] = []

    def send_later() -> None:
        with open_store(store_url) as other:
            time.sleep(0.2)
            sent_at.append(time.monotonic())
            other.send(TEAM, "q", {"n": 1})

    sender = threading.Thread(target=send_later)
    sender.start()
    try:
        got = store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, wait=10.0)
        woke = time.monotonic()
    finally:
        sender.join()
    assert [d.payload for d in got] == [{"n": 1}]
    assert woke - sent_at[0] < 0.5  # far from the 10 s it would wait


def test_a_send_from_another_process_wakes_the_wait(store: Store, store_url: str) -> None:
    if not store.shared_across_processes:
        pytest.skip("a memory store is not shared between processes")
    child = subprocess.Popen(
        [sys.executable, "-c", SENDER, store_url, TEAM], stdout=subprocess.PIPE, text=True
    )
    try:
        got = store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, wait=30.0)
        woke = time.time()
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
    assert [d.payload for d in got] == [{"type": "wake"}]
    assert woke - float(out.strip()) < 0.5  # far from the 30 s it would wait


def test_a_send_to_another_queue_does_not_end_the_wait(store: Store, store_url: str) -> None:
    timer = threading.Timer(0.1, lambda: store.send(TEAM, "other", {"n": 1}))
    timer.start()
    try:
        got = store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, wait=0.5)
    finally:
        timer.join()
    assert got == []
    assert [
        d.payload for d in store.receive(TEAM, "other", consumer="c1", visibility_timeout=5.0)
    ] == [{"n": 1}]


def test_a_held_message_is_waited_for_until_its_visibility_passes(store: Store) -> None:
    store.send(TEAM, "q", {"n": 1})
    [first] = store.receive(TEAM, "q", consumer="c1", visibility_timeout=0.4)
    started = time.monotonic()
    [again] = store.receive(TEAM, "q", consumer="c2", visibility_timeout=5.0, wait=10.0)
    waited = time.monotonic() - started
    assert again.message_id == first.message_id
    assert again.delivery_count == 2
    assert 0.3 <= waited < 2.0  # not before its timeout, and not the whole wait


def test_a_given_back_message_ends_the_wait(store: Store) -> None:
    store.send(TEAM, "q", {"n": 1})
    [held] = store.receive(TEAM, "q", consumer="c1", visibility_timeout=60.0)
    timer = threading.Timer(0.1, lambda: store.release(TEAM, "q", held.message_id))
    timer.start()
    started = time.monotonic()
    try:
        [again] = store.receive(TEAM, "q", consumer="c2", visibility_timeout=5.0, wait=10.0)
    finally:
        timer.join()
    assert again.message_id == held.message_id
    assert time.monotonic() - started < 1.5


def test_a_wait_dead_letters_instead_of_delivering_past_max_deliveries(store: Store) -> None:
    message_id = store.send(TEAM, "q", {"n": 1})
    store.receive(TEAM, "q", consumer="c1", visibility_timeout=0.2, max_deliveries=1)
    got = store.receive(
        TEAM, "q", consumer="c2", visibility_timeout=5.0, max_deliveries=1, wait=0.6
    )
    assert got == []
    assert [d.message_id for d in store.dead_letters(TEAM, "q")] == [message_id]


def test_a_wait_never_hands_out_a_message_another_consumer_holds(store: Store) -> None:
    store.send(TEAM, "q", {"n": 1})
    store.receive(TEAM, "q", consumer="c1", visibility_timeout=30.0)
    assert store.receive(TEAM, "q", consumer="c2", visibility_timeout=5.0, wait=0.3) == []


def test_two_waiters_share_a_batch_without_overlap(store: Store, store_url: str) -> None:
    found: list[str] = []
    lock = threading.Lock()

    def wait_for_one(name: str) -> None:
        with open_store(store_url) as mine:
            got = mine.receive(TEAM, "q", consumer=name, visibility_timeout=30.0, wait=3.0)
        with lock:
            found.extend(d.message_id for d in got)

    waiters = [threading.Thread(target=wait_for_one, args=(f"c{i}",)) for i in range(2)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.1)
    sent = store.send_many(TEAM, "q", [{"n": 1}, {"n": 2}])
    for waiter in waiters:
        waiter.join()
    assert sorted(found) == sorted(sent)


@pytest.mark.parametrize("wait", [-1.0, -0.001, "1", True, float("nan")])
def test_a_bad_wait_is_refused(store: Store, wait: object) -> None:
    with pytest.raises(ProtocolError, match="wait"):
        store.receive(TEAM, "q", consumer="c1", visibility_timeout=5.0, wait=wait)  # type: ignore[arg-type]
