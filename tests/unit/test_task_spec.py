"""The register's task spec and attempt data are typed: parsed once, defaults in one
place, and a key no model declares is refused, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure.coord import LeaseKeeper, LeaseTiming
from tenure.protocol import Plan, ProtocolError
from tenure.protocol.plan import DEFAULT_MAX_ATTEMPTS
from tenure.protocol.taskspec import AttemptData, TaskSpec, parse_data, parse_spec, spec_for
from tenure.roles.leader import Conductor
from tenure.roles.register import Register, RegisterView, read_task
from tenure.store import Store, open_store

TEAM = "typed"


def test_an_unknown_key_in_a_spec_is_refused_by_name() -> None:
    with pytest.raises(ProtocolError, match=r"spec\.colour: no such field") as caught:
        parse_spec({"id": "t", "goal": "g", "colour": "red"}, source="task 't'")
    assert "task 't'" in str(caught.value)
    with pytest.raises(ProtocolError, match=r"data\.dispatchd_at: no such field"):
        parse_data({"dispatchd_at": 1.0}, source="task 't'")


def test_every_default_lives_in_one_place() -> None:
    spec = TaskSpec(id="t", goal="g")
    assert spec.deadline_seconds == 300.0 and spec.max_attempts == DEFAULT_MAX_ATTEMPTS
    assert TaskSpec.model_validate({"id": "t", "goal": "g", "max_attempts": None}).max_attempts == 3
    assert AttemptData().dump() == {}  # a new task's data is empty in the register
    plan = Plan.model_validate(
        {"team": TEAM, "max_attempts": 5, "budget": {"tokens": 10}, "tasks": [{"id": "t", "goal": "g"}]}
    )
    registered = spec_for(plan, plan.tasks[0])
    assert registered.max_attempts == 5 and registered.team_budget is not None


def test_a_record_is_parsed_once_per_change(store: Store) -> None:
    register = Register(store, TEAM, lambda: 0)
    register.create("t", TaskSpec(id="t", goal="g"))
    view = RegisterView(store, TEAM)
    first = view.tasks()[0]
    again = view.tasks()[0]
    assert again is first  # nothing changed: not read, not parsed again
    register.move(first, "queued", data=first.data.with_(question="why?"))
    changed = view.tasks()[0]
    assert changed is not first and changed.data.question == "why?"
    assert changed.spec is first.spec  # the spec did not change: the parsed one is kept


def test_a_register_entry_with_an_unknown_key_is_set_aside_naming_it(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    keeper = LeaseKeeper(store, TEAM, "lead", LeaseTiming(ttl=60))
    keeper.claim()
    store.create_task(TEAM, "odd", epoch=keeper.epoch, spec={"goal": "g", "colour": "red"})
    assert read_task(store.get_task(TEAM, "odd")).problem is not None
    conductor = Conductor(store, TEAM, "lead", keeper.check)
    conductor.tick()
    odd = store.get_task(TEAM, "odd")
    assert odd.state == "blocked" and "spec.colour" in odd.reason and odd.attempt == 0
    [event] = [e for e in store.events(TEAM) if e.kind == "leader.unreadable_task"]
    assert event.data["task_id"] == "odd" and "colour" in event.data["error"]
    store.close()
