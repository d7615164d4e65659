"""The leader's incremental view of the register always equals a full read."""

from __future__ import annotations

from collections.abc import Sequence

from conftest import LEASE_TOKEN
from tenure.roles.register import read_task
from tenure.roles.register.view import RegisterView
from tenure.store import Store, TaskRecord

TEAM = "view"


def snapshot(tasks: list[TaskRecord]) -> list[tuple[str, str, int, str | None]]:
    return [(t.task_id, t.state, t.version, t.assignee) for t in tasks]


def test_the_view_follows_changes_made_by_other_writers(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch
    for name in ("a", "b", "c"):
        store.create_task(TEAM, name, epoch=epoch, spec={"goal": name})
    view = RegisterView(store, TEAM)
    assert snapshot(view.tasks()) == snapshot(store.tasks(TEAM))

    store.transition(TEAM, "b", epoch=epoch, expect=["queued"], to="running", assignee="w1")
    store.create_task(TEAM, "d", epoch=epoch, spec={"goal": "d"})
    store.send(TEAM, "leader", {"noise": True})  # events that name no task are skipped
    store.transition(TEAM, "a", epoch=epoch, expect=["queued"], to="cancelled", reason="x")
    assert snapshot(view.tasks()) == snapshot(store.tasks(TEAM))
    whole = [
        (t.record.attempt, t.reason, t.result, t.record.data, t.record.spec, t.epoch)
        for t in view.tasks()
    ]
    assert whole == [
        (t.attempt, t.reason, t.result, t.data, t.spec, t.epoch) for t in store.tasks(TEAM)
    ]
    assert [t.task_id for t in view.tasks()] == ["a", "b", "c", "d"]


def test_an_unchanged_register_is_not_read_again(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch
    store.create_task(TEAM, "a", epoch=epoch, spec={"goal": "a"})
    view = RegisterView(store, TEAM)
    first = view.tasks()
    reads: list[list[str]] = []
    original = store.get_tasks

    def counting(team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        reads.append(list(task_ids))
        return original(team, task_ids)

    store.get_tasks = counting  # type: ignore[method-assign]
    assert snapshot(view.tasks()) == snapshot(first)
    assert reads == []
    store.transition(TEAM, "a", epoch=epoch, expect=["queued"], to="running", assignee="w1")
    assert snapshot(view.tasks()) == snapshot(store.tasks(TEAM))
    assert reads == []  # the event says the whole change: no read
    store.transition(
        TEAM, "a", epoch=epoch, expect=["running"], to="running", data={"question": "which?"}
    )
    assert view.tasks()[0].data.question == "which?"
    assert reads == [["a"]]  # new data: what changed, in one read


def test_a_change_the_view_was_told_of_is_not_read_again(store: Store) -> None:
    """The leader notes what it wrote itself: the events of its own writes cost no read,
    another writer's later change to the same task does."""
    epoch = store.claim_lease(TEAM, "leader", 30.0, token=LEASE_TOKEN).epoch
    store.create_task(TEAM, "a", epoch=epoch, spec={"goal": "a"})
    view = RegisterView(store, TEAM)
    view.tasks()
    mine = store.transition(TEAM, "a", epoch=epoch, expect=["queued"], to="running")
    [task] = [t for t in view.tasks() if t.task_id == "a"]  # read once: not told yet
    reads: list[list[str]] = []
    original = store.get_tasks

    def counting(team: str, task_ids: Sequence[str]) -> list[TaskRecord]:
        reads.append(list(task_ids))
        return original(team, task_ids)

    store.get_tasks = counting  # type: ignore[method-assign]
    mine = store.transition(TEAM, "a", epoch=epoch, expect=["running"], to="review")
    view.note(read_task(mine))
    assert view.tasks()[0].state == "review" and reads == []
    store.transition(TEAM, "a", epoch=epoch, expect=["review"], to="done", data={})  # another
    assert view.tasks()[0].state == "done" and reads == [["a"]]
    assert task.state == "running"
