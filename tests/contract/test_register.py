"""Task register: compare-and-set transitions, fenced by the team's epoch."""

from __future__ import annotations

import time

import pytest

from conftest import LEASE_TOKEN
from tenure.protocol.errors import Conflict, NotFound, StaleEpoch
from tenure.store import ALLOWED_TRANSITIONS, TASK_STATES, Store, TaskState

from ._support import OTHER_TEAM, TEAM, last_seq


def lead(store: Store, holder: str = "leader", *, team: str = TEAM) -> int:
    """Take the lease (releasing any earlier one of ours) and return the new epoch."""
    current = store.current_lease(team)
    if current is not None:
        store.release_lease(team, current.holder, current.epoch, token=LEASE_TOKEN)
    return store.claim_lease(team, holder, 30.0, token=LEASE_TOKEN).epoch


SPEC = {"goal": "write the parser", "checks": [{"cmd": "pytest", "exit": 0}], "n": 1.5}


# --- create ---------------------------------------------------------------------------


def test_create_task_registers_a_queued_task(store: Store) -> None:
    epoch = lead(store)
    before = store.now()
    record = store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    after = store.now()
    assert (record.team, record.task_id, record.state) == (TEAM, "t1", "queued")
    assert record.spec == SPEC
    assert record.epoch == epoch
    assert record.assignee is None
    assert record.result is None
    assert record.attempt == 0
    assert record.reason == ""
    assert record.data == {}
    assert before <= record.created_at <= after
    assert record.updated_at == pytest.approx(record.created_at)
    assert store.get_task(TEAM, "t1") == record


def test_create_task_in_a_given_state(store: Store) -> None:
    epoch = lead(store)
    assert store.create_task(TEAM, "t1", epoch=epoch, spec={}, state="blocked").state == "blocked"
    assert store.get_task(TEAM, "t1").state == "blocked"


def test_create_task_with_duplicate_id_raises_conflict(store: Store) -> None:
    epoch = lead(store)
    first = store.create_task(TEAM, "t1", epoch=epoch, spec={"a": 1})
    with pytest.raises(Conflict):
        store.create_task(TEAM, "t1", epoch=epoch, spec={"a": 2})
    assert store.get_task(TEAM, "t1") == first
    assert [t.task_id for t in store.tasks(TEAM)] == ["t1"]


def test_create_task_with_stale_epoch_raises_stale_epoch(store: Store) -> None:
    old = lead(store, "old")
    new = lead(store, "new")
    assert new > old
    seq = last_seq(store)
    with pytest.raises(StaleEpoch) as caught:
        store.create_task(TEAM, "t1", epoch=old, spec={})
    assert caught.value.epoch == old
    assert caught.value.current == new
    with pytest.raises(NotFound):
        store.get_task(TEAM, "t1")
    assert store.tasks(TEAM) == []
    assert store.events(TEAM, after=seq) == []


def test_create_task_at_current_epoch_is_accepted_after_takeover(store: Store) -> None:
    lead(store, "old")
    new = lead(store, "new")
    assert store.create_task(TEAM, "t1", epoch=new, spec={}).epoch == new


def test_same_task_id_in_two_teams_are_separate_tasks(store: Store) -> None:
    store.create_task(TEAM, "t1", epoch=lead(store), spec={"team": "a"})
    store.create_task(OTHER_TEAM, "t1", epoch=lead(store, team=OTHER_TEAM), spec={"team": "b"})
    assert store.get_task(TEAM, "t1").spec == {"team": "a"}
    assert store.get_task(OTHER_TEAM, "t1").spec == {"team": "b"}


# --- read -----------------------------------------------------------------------------


def test_get_task_of_unknown_id_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.get_task(TEAM, "missing")
    store.create_task(TEAM, "t1", epoch=lead(store), spec={})
    with pytest.raises(NotFound):
        store.get_task(TEAM, "missing")
    with pytest.raises(NotFound):
        store.get_task(OTHER_TEAM, "t1")


def test_tasks_are_listed_oldest_first(store: Store) -> None:
    epoch = lead(store)
    for task_id in ("t3", "t1", "zz", "a2"):
        store.create_task(TEAM, task_id, epoch=epoch, spec={})
        time.sleep(0.002)
    # A change does not move a task in the list.
    store.transition(TEAM, "t3", epoch=epoch, expect=["queued"], to="running")
    assert [t.task_id for t in store.tasks(TEAM)] == ["t3", "t1", "zz", "a2"]
    assert store.tasks(OTHER_TEAM) == []


# --- transition -------------------------------------------------------------------------


def test_transition_changes_state_bumps_version_and_records_epoch(store: Store) -> None:
    first = lead(store, "old")
    created = store.create_task(TEAM, "t1", epoch=first, spec=SPEC)
    second = lead(store, "new")
    moved = store.transition(
        TEAM, "t1", epoch=second, expect=["queued"], to="running", version=created.version
    )
    assert moved.state == "running"
    assert moved.version > created.version
    assert moved.epoch == second
    assert moved.spec == SPEC
    assert moved.created_at == pytest.approx(created.created_at)
    assert moved.updated_at >= created.updated_at
    assert store.get_task(TEAM, "t1") == moved


def test_transition_with_state_outside_expect_raises_conflict(store: Store) -> None:
    epoch = lead(store)
    created = store.create_task(TEAM, "t1", epoch=epoch, spec={})
    with pytest.raises(Conflict):
        store.transition(TEAM, "t1", epoch=epoch, expect=["running", "review"], to="done")
    assert store.get_task(TEAM, "t1") == created


def test_transition_accepts_any_state_in_the_expect_set(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    moved = store.transition(TEAM, "t1", epoch=epoch, expect={"running", "queued"}, to="running")
    assert moved.state == "running"


def test_transition_with_wrong_version_raises_conflict(store: Store) -> None:
    epoch = lead(store)
    created = store.create_task(TEAM, "t1", epoch=epoch, spec={})
    updated = store.transition(
        TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", assignee="w1"
    )
    assert updated.version > created.version
    with pytest.raises(Conflict):
        store.transition(
            TEAM, "t1", epoch=epoch, expect=["queued"], to="running", version=created.version
        )
    assert store.get_task(TEAM, "t1") == updated
    moved = store.transition(
        TEAM, "t1", epoch=epoch, expect=["queued"], to="running", version=updated.version
    )
    assert moved.state == "running"


def test_transition_without_version_skips_the_version_check(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", attempt=1)
    moved = store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running")
    assert moved.state == "running"


def test_a_state_may_follow_itself_as_an_update_in_place(store: Store) -> None:
    epoch = lead(store)
    created = store.create_task(TEAM, "t1", epoch=epoch, spec={})
    updated = store.transition(
        TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", assignee="w2"
    )
    assert (updated.state, updated.assignee) == ("queued", "w2")
    assert updated.version > created.version


@pytest.mark.parametrize(
    ("start", "to"),
    [(a, b) for a in TASK_STATES for b in TASK_STATES],
    ids=[f"{a}->{b}" for a in TASK_STATES for b in TASK_STATES],
)
def test_transition_table(store: Store, start: TaskState, to: TaskState) -> None:
    epoch = lead(store)
    created = store.create_task(TEAM, "t1", epoch=epoch, spec={}, state=start)
    if to in ALLOWED_TRANSITIONS[start]:
        moved = store.transition(TEAM, "t1", epoch=epoch, expect=[start], to=to)
        assert moved.state == to
        assert moved.version > created.version
    else:
        with pytest.raises(Conflict):
            store.transition(TEAM, "t1", epoch=epoch, expect=[start], to=to)
        assert store.get_task(TEAM, "t1") == created


def test_done_task_cannot_run_again(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    for frm, to in (("queued", "running"), ("running", "review"), ("review", "done")):
        store.transition(TEAM, "t1", epoch=epoch, expect=[frm], to=to)
    done = store.get_task(TEAM, "t1")
    with pytest.raises(Conflict):
        store.transition(TEAM, "t1", epoch=epoch, expect=["done"], to="running")
    assert store.get_task(TEAM, "t1") == done


def test_transition_with_stale_epoch_raises_and_changes_nothing(store: Store) -> None:
    old = lead(store, "old")
    store.create_task(TEAM, "t1", epoch=old, spec=SPEC)
    before = store.transition(
        TEAM,
        "t1",
        epoch=old,
        expect=["queued"],
        to="running",
        assignee="w1",
        attempt=1,
        data={"k": "v"},
    )
    new = lead(store, "new")
    seq = last_seq(store)
    with pytest.raises(StaleEpoch) as caught:
        store.transition(
            TEAM,
            "t1",
            epoch=old,
            expect=["running"],
            to="review",
            version=before.version,
            assignee="w9",
            attempt=2,
            result={"status": "completed"},
            reason="stale leader",
            data={"k": "overwritten"},
        )
    assert (caught.value.team, caught.value.epoch, caught.value.current) == (TEAM, old, new)
    assert store.get_task(TEAM, "t1") == before
    assert store.events(TEAM, after=seq) == []
    assert store.current_epoch(TEAM) == new


def test_stale_epoch_is_refused_even_for_a_long_gone_epoch(store: Store) -> None:
    store.claim_lease(TEAM, "leader", 30.0, at_least=99, token=LEASE_TOKEN)
    store.create_task(TEAM, "t1", epoch=100, spec={})
    for epoch in (0, 1, 99):
        with pytest.raises(StaleEpoch):
            store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running")
    assert store.get_task(TEAM, "t1").state == "queued"


def test_transition_sets_the_fields_it_is_given(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    moved = store.transition(
        TEAM,
        "t1",
        epoch=epoch,
        expect=["queued"],
        to="running",
        assignee="w1",
        attempt=2,
        result={"status": "completed", "artifact": [1, 2]},
        reason="assigned",
        data={"note": {"nested": True}},
    )
    assert moved.assignee == "w1"
    assert moved.attempt == 2
    assert moved.result == {"status": "completed", "artifact": [1, 2]}
    assert moved.reason == "assigned"
    assert moved.data == {"note": {"nested": True}}
    assert store.get_task(TEAM, "t1") == moved


def test_unset_fields_keep_their_values(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    store.transition(
        TEAM,
        "t1",
        epoch=epoch,
        expect=["queued"],
        to="running",
        assignee="w1",
        attempt=3,
        result={"r": 1},
        reason="why",
        data={"d": 1},
    )
    moved = store.transition(TEAM, "t1", epoch=epoch, expect=["running"], to="review")
    assert moved.state == "review"
    assert (moved.assignee, moved.attempt, moved.reason) == ("w1", 3, "why")
    assert moved.result == {"r": 1}
    assert moved.data == {"d": 1}
    assert moved.spec == SPEC
    partly = store.transition(TEAM, "t1", epoch=epoch, expect=["review"], to="review", reason="x")
    assert partly.reason == "x"
    assert (partly.assignee, partly.attempt, partly.result, partly.data) == (
        "w1",
        3,
        {"r": 1},
        {"d": 1},
    )


def test_none_clears_a_field_unlike_unset(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec={})
    store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running", assignee="w1")
    back = store.transition(
        TEAM, "t1", epoch=epoch, expect=["running"], to="queued", assignee=None, result=None
    )
    assert back.assignee is None
    assert back.result is None


def test_transition_of_unknown_task_raises_not_found(store: Store) -> None:
    epoch = lead(store)
    with pytest.raises(NotFound):
        store.transition(TEAM, "missing", epoch=epoch, expect=["queued"], to="running")


# --- spec ------------------------------------------------------------------------------

NEW_SPEC = {"goal": "write the parser again", "checks": [], "n": 2}


def test_transition_with_spec_replaces_it_and_bumps_the_version(store: Store) -> None:
    epoch = lead(store)
    created = store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    seq = last_seq(store)
    moved = store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", spec=NEW_SPEC)
    assert moved.spec == NEW_SPEC
    assert moved.version == created.version + 1
    assert store.get_task(TEAM, "t1") == moved
    (event,) = store.events(TEAM, after=seq)
    assert event.kind == "task.transition"
    assert event.data.get("spec") is True, "a replaced spec is noted, not copied"


def test_transition_without_spec_keeps_it(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    seq = last_seq(store)
    moved = store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running")
    assert moved.spec == SPEC
    (event,) = store.events(TEAM, after=seq)
    assert "spec" not in event.data


def test_spec_with_other_fields_changes_them_in_one_step(store: Store) -> None:
    epoch = lead(store)
    created = store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    moved = store.transition(
        TEAM,
        "t1",
        epoch=epoch,
        expect=["queued"],
        to="queued",
        spec=NEW_SPEC,
        reason="replanned",
        data={"replanned": 1},
    )
    assert (moved.spec, moved.reason, moved.data) == (NEW_SPEC, "replanned", {"replanned": 1})
    assert moved.version == created.version + 1


def test_stale_transition_with_spec_changes_nothing(store: Store) -> None:
    old = lead(store, "old")
    before = store.create_task(TEAM, "t1", epoch=old, spec=SPEC)
    lead(store, "new")
    seq = last_seq(store)
    with pytest.raises(StaleEpoch):
        store.transition(TEAM, "t1", epoch=old, expect=["queued"], to="queued", spec=NEW_SPEC)
    assert store.get_task(TEAM, "t1") == before
    assert store.events(TEAM, after=seq) == []


def test_conflicting_transition_with_spec_changes_nothing(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    before = store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="running")
    seq = last_seq(store)
    with pytest.raises(Conflict):  # not in the expected state
        store.transition(TEAM, "t1", epoch=epoch, expect=["queued"], to="queued", spec=NEW_SPEC)
    with pytest.raises(Conflict):  # an older version
        store.transition(
            TEAM,
            "t1",
            epoch=epoch,
            expect=["running"],
            to="running",
            version=before.version - 1,
            spec=NEW_SPEC,
        )
    with pytest.raises(Conflict):  # not an allowed transition
        store.transition(TEAM, "t1", epoch=epoch, expect=["running"], to="done", spec=NEW_SPEC)
    assert store.get_task(TEAM, "t1") == before
    assert store.events(TEAM, after=seq) == []


# --- clearing the register (a fresh start) --------------------------------------------


def test_clear_tasks_removes_the_teams_tasks_and_nothing_else(store: Store) -> None:
    epoch = lead(store)
    store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)
    done = store.create_task(TEAM, "t2", epoch=epoch, spec=SPEC)
    store.transition(TEAM, "t2", epoch=epoch, expect=["queued"], to="cancelled", version=done.version)
    store.create_task(OTHER_TEAM, "t1", epoch=lead(store, team=OTHER_TEAM), spec=SPEC)
    ticket = store.effect_begin(TEAM, "t1:attempt-1", epoch=epoch, holder="w", claim_seconds=30)
    assert ticket.status == "run"
    store.effect_finish(TEAM, "t1:attempt-1", holder="w", result={"ok": True})
    assert store.clear_tasks(TEAM, epoch=epoch) == 2
    assert store.tasks(TEAM) == []
    with pytest.raises(NotFound):
        store.get_task(TEAM, "t1")
    assert [t.task_id for t in store.tasks(OTHER_TEAM)] == ["t1"]
    recorded = store.effect_lookup(TEAM, "t1:attempt-1")  # the ledger keeps every key
    assert recorded is not None and recorded.result == {"ok": True}
    assert store.current_epoch(TEAM) == epoch
    again = store.create_task(TEAM, "t1", epoch=epoch, spec=SPEC)  # the id is free again
    assert again.version == 1 and again.attempt == 0
    kinds = [e.kind for e in store.events(TEAM, limit=1000)]
    assert "register.cleared" in kinds


def test_clear_tasks_with_a_stale_epoch_changes_nothing(store: Store) -> None:
    old = lead(store)
    store.create_task(TEAM, "t1", epoch=old, spec=SPEC)
    lead(store, "successor")
    with pytest.raises(StaleEpoch):
        store.clear_tasks(TEAM, epoch=old)
    assert [t.task_id for t in store.tasks(TEAM)] == ["t1"]
