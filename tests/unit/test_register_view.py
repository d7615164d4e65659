"""The leader's incremental view of the register always equals a full read."""

from __future__ import annotations

from tenure.roles.register.view import RegisterView
from tenure.store import Store, TaskRecord

TEAM = "view"


def snapshot(tasks: list[TaskRecord]) -> list[tuple[str, str, int, str | None]]:
    return [(t.task_id, t.state, t.version, t.assignee) for t in tasks]


def test_the_view_follows_changes_made_by_other_writers(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 30.0).epoch
    for name in ("a", "b", "c"):
        store.create_task(TEAM, name, epoch=epoch, spec={"goal": name})
    view = RegisterView(store, TEAM)
    assert snapshot(view.tasks()) == snapshot(store.tasks(TEAM))

    store.transition(TEAM, "b", epoch=epoch, expect=["queued"], to="running", assignee="w1")
    store.create_task(TEAM, "d", epoch=epoch, spec={"goal": "d"})
    store.send(TEAM, "leader", {"noise": True})  # events that name no task are skipped
    store.transition(TEAM, "a", epoch=epoch, expect=["queued"], to="cancelled", reason="x")
    assert snapshot(view.tasks()) == snapshot(store.tasks(TEAM))
    assert [t.task_id for t in view.tasks()] == ["a", "b", "c", "d"]


def test_an_unchanged_register_is_not_read_again(store: Store) -> None:
    epoch = store.claim_lease(TEAM, "leader", 30.0).epoch
    store.create_task(TEAM, "a", epoch=epoch, spec={"goal": "a"})
    view = RegisterView(store, TEAM)
    first = view.tasks()
    reads: list[str] = []
    original = store.get_task

    def counting(team: str, task_id: str) -> TaskRecord:
        reads.append(task_id)
        return original(team, task_id)

    store.get_task = counting  # type: ignore[method-assign]
    assert snapshot(view.tasks()) == snapshot(first)
    assert reads == []
    store.transition(TEAM, "a", epoch=epoch, expect=["queued"], to="running")
    assert view.tasks()[0].state == "running"
    assert reads == ["a"]
