"""The rules of a replan, as properties: whatever the old register and the new plan, the
register afterwards holds what operations.md's table says (memory store, no processes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenure
from conftest import LEASE_TOKEN
from tenure.protocol import ConfigError, Plan
from tenure.protocol.taskspec import AttemptData, TaskSpec, spec_for
from tenure.roles.leader.replan import MARK, ReplanMark, apply_plan, dropped_by_replan
from tenure.roles.register import Register, Task
from tenure.roles.register.revision import latest_revision
from tenure.store import TERMINAL_STATES, Store, open_store

TEAM = "rules"
IDS = ["a", "b", "c", "d", "e"]
STATES = ["queued", "blocked", "failed", "done", "cancelled", "running", "dispatched"]


@dataclass
class Ctx:
    store: Store
    team: str
    me: str
    register: Register
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    at: int = 1

    def epoch(self) -> int:
        return self.at

    def now(self) -> float:
        return self.store.now()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append((kind, data))


def plan_of(tasks: dict[str, str]) -> Plan:
    return Plan.model_validate(
        {"team": TEAM, "tasks": [{"id": k, "goal": v} for k, v in sorted(tasks.items())]}
    )


plans = st.dictionaries(st.sampled_from(IDS), st.sampled_from(["old goal", "new goal"]), min_size=1)


def seeded(store: Store, ctx: Ctx, old: Plan, states: dict[str, str]) -> dict[str, Task]:
    for entry in old.tasks:
        task = ctx.register.create(entry.id, spec_for(old, entry))
        state = states.get(entry.id, "queued")
        if state == "dispatched":
            task = ctx.register.move(task, "queued", assignee="w1", attempt=1)
        elif state == "running":
            task = ctx.register.move(task, "queued", assignee="w1", attempt=1)
            task = ctx.register.move(task, "running")
        elif state in ("done", "cancelled"):
            task = ctx.register.move(task, "running", attempt=1)
            task = ctx.register.move(task, "review")
            task = ctx.register.move(task, "done" if state == "done" else "cancelled")
        elif state != "queued":
            task = ctx.register.move(task, state, attempt=1)
    return {t.task_id: t for t in ctx.register.tasks()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    old=plans,
    new=plans,
    states=st.dictionaries(st.sampled_from(IDS), st.sampled_from(STATES)),
    cancel_running=st.booleans(),
)
def test_a_replan_leaves_the_register_as_the_rules_say(
    old: dict[str, str], new: dict[str, str], states: dict[str, str], cancel_running: bool
) -> None:
    with open_store("memory://") as store:
        epoch = store.claim_lease(TEAM, "lead", 30.0, token=LEASE_TOKEN).epoch
        ctx = Ctx(store, TEAM, "lead", Register(store, TEAM, lambda: epoch), at=epoch)
        old_plan, new_plan = plan_of(old), plan_of(new)
        before = seeded(store, ctx, old_plan, states)
        entry = apply_plan(
            ctx, new_plan, revision=1, reason="why", cancel_running=cancel_running, by="me"
        )
        after = {t.task_id: t for t in ctx.register.tasks()}
        assert set(after) == set(old) | set(new)  # added tasks registered, none deleted
        for task_id, task in after.items():
            was = before.get(task_id)
            running = was is not None and (
                was.state == "running" or (was.state == "queued" and bool(was.assignee))
            )
            if was is not None and was.state in TERMINAL_STATES:
                assert task.state == was.state and task.version == was.version  # untouched
            elif task_id not in new:  # dropped
                if running and not cancel_running:
                    mark = ReplanMark.of(task.data)
                    assert task.state == was.state and mark is not None and mark.drop
                else:
                    assert task.state == "cancelled" and "why" in task.reason
            elif was is None:  # added
                assert task.state == "queued"
            elif old[task_id] == new[task_id]:  # unchanged: only --cancel-running stops it
                if running and cancel_running:
                    assert task.state == "queued" and task.assignee is None
                    assert task.used_attempts == 0
                else:
                    assert task.state == was.state
            elif running and not cancel_running:  # changed while running: re-run later
                mark = ReplanMark.of(task.data)
                assert task.state == was.state and mark is not None and mark.spec is not None
                assert mark.spec.goal == new[task_id]
            else:  # changed, not running (any more): re-derived with a fresh allowance
                assert task.state == "queued" and task.assignee is None
                assert task.spec.goal == new[task_id]
                assert task.used_attempts == 0
        assert sorted(entry.added) == sorted(set(new) - set(old))
        assert sorted(entry.dropped) == sorted(set(old) - set(new))
        assert sorted(entry.changed) == sorted(k for k in set(old) & set(new) if old[k] != new[k])
        assert [k for k, _ in ctx.events] == ["plan.update"]
        recorded = latest_revision(store, TEAM)
        assert recorded is not None and recorded.revision == 1 and recorded.reason == "why"
        # applied again (an applier that died before recording it): nothing moves
        snapshot = {k: (t.state, t.spec.goal, t.data.hooks) for k, t in after.items()}
        apply_plan(ctx, new_plan, revision=1, reason="why", cancel_running=cancel_running, by="me")
        again = {t.task_id: t for t in ctx.register.tasks()}
        assert {k: (t.state, t.spec.goal, t.data.hooks) for k, t in again.items()} == snapshot


def test_a_replans_mark_is_one_typed_value_in_the_tasks_data() -> None:
    """What a replan decided is parsed once into ``ReplanMark``; the register keeps the
    JSON it always kept, and a mark that is not one a replan wrote is not acted on."""
    spec = TaskSpec(id="a", goal="new goal")
    data = ReplanMark(spec=spec).into(AttemptData(hooks={"other": {"n": 1}}))
    assert data.hooks["other"] == {"n": 1} and set(data.hooks[MARK]) == {"spec"}
    read = ReplanMark.of(AttemptData.model_validate(data.dump()))
    assert read is not None and read.spec == spec and read.drop is None
    assert ReplanMark(drop="why").into(AttemptData()).hooks[MARK] == {"drop": "why"}
    assert ReplanMark(dropped=True).into(AttemptData()).hooks[MARK] == {"dropped": True}
    for junk in ({"drop": 3}, {"colour": "red"}, {"spec": {"goal": "no id"}}):
        assert ReplanMark.of(AttemptData(hooks={MARK: junk})) is None
    assert ReplanMark.of(AttemptData()) is None
    with open_store("memory://") as store:
        register = Register(store, TEAM, lambda: 0)
        task = register.create("a", spec)
        gone = register.move(task, "cancelled", data=ReplanMark(dropped=True).into(task.data))
        assert dropped_by_replan(gone)


def test_team_run_refuses_a_changed_plan_and_runs_it_once_replanned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = tenure.Team(plan_of({"a": "old goal"}), executor="noop", store=url).run()
    assert first.ok
    changed = plan_of({"a": "old goal", "b": "new goal"})
    with pytest.raises(ConfigError, match="tenure replan"):
        tenure.Team(changed, executor="noop", store=url).run()
    with open_store(url) as store:
        assert [t.task_id for t in store.tasks(TEAM)] == ["a"]  # nothing of it registered
        done = tenure.replan(store, changed, reason="b too")
    assert done.revision.added == ["b"] and done.applied_by == "directly"
    again = tenure.Team(changed, executor="noop", store=url).run()
    assert again.ok
    with open_store(url) as store:
        assert {t.task_id: (t.state, t.attempt) for t in store.tasks(TEAM)} == {
            "a": ("done", 1),  # not run again
            "b": ("done", 1),
        }
