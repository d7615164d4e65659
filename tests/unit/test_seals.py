"""Seals on register writes, driven round by round in one process.

A signed conductor and signed followers on a memory store; the "attacker" writes with
the store's own calls (no seal, or a seal it signed itself), never through a
``Register``, so nothing it writes is vouched for by this process. The same attacks
by a separate process, on SQLite and Redis, are in ``tests/faults/test_seals.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import LEASE_TOKEN
from tenure.coord import Credentials, LeaseKeeper, LeaseTiming
from tenure.coord.credentials import init_team, rotate_lead
from tenure.executors import TaskContext, coerce_result
from tenure.protocol import (
    ConfigError,
    Plan,
    TaskEnvelope,
    TaskResult,
    idempotency_key,
    to_dict,
)
from tenure.protocol.messages import AssignMessage, ResultMessage
from tenure.protocol.taskspec import spec_for
from tenure.roles import LEADER_QUEUE, Conductor, Follower, FollowerConfig
from tenure.roles.member import WORK_QUEUE
from tenure.roles.register import Register
from tenure.roles.register import seal as seals
from tenure.roles.register.access import sealed_transition
from tenure.roles.register.seal import SEAL, After, seal_body
from tenure.roles.teams import inbox as operator
from tenure.roles.teams import reading
from tenure.roles.teams.queue import QueueWorker, enqueue_plan
from tenure.store import Event, Store, TaskRecord, open_store
from tenure.store.memory import MemoryStore

TEAM = "unit-seals"


class Recording:
    """An executor recording every envelope it runs; ``produce`` makes the result."""

    def __init__(self, produce: Callable[[TaskEnvelope], Any] | None = None) -> None:
        self.calls: list[TaskEnvelope] = []
        self.produce = produce or (lambda env: {"done": env.task_id})

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        self.calls.append(envelope)
        return coerce_result(envelope, self.produce(envelope))

    def count(self) -> Counter[str]:
        return Counter(env.task_id for env in self.calls)


def scripted(steps: dict[str, list[Any]]) -> Callable[[TaskEnvelope], Any]:
    """One answer per attempt of each task (the last one repeats)."""

    def produce(env: TaskEnvelope) -> Any:
        options = steps.get(env.task_id, [{"done": env.task_id}])
        return options[min(env.attempt, len(options)) - 1]

    return produce


def plan_of(*tasks: dict[str, Any]) -> Plan:
    return Plan.model_validate(
        {"team": TEAM, "tasks": [{"goal": f"do {t['id']}", **t} for t in tasks]}
    )


@pytest.fixture
def mem() -> MemoryStore:
    return MemoryStore()


class Signed:
    """A signed conductor under a real lease, and signed followers driven by hand."""

    def __init__(self, store: Store, tmp_path: Path, plan: Plan | None, members: int = 2) -> None:
        self.store = store
        self.tmp_path = tmp_path
        self.keys = tmp_path / "keys"
        self.ids = [f"w{n}" for n in range(1, members + 1)]
        init_team(self.keys, TEAM, self.ids)
        self.keeper = LeaseKeeper(store, TEAM, "leader", LeaseTiming(ttl=60))
        self.keeper.claim()
        self.followers: dict[str, Follower] = {}
        self.conductor = self.lead(plan)

    def lead(self, plan: Plan | None) -> Conductor:
        """A conductor (a new term: a new process's view) loading ``plan``."""
        credentials = Credentials.load(self.keys, TEAM, "leader", "lead")
        conductor = Conductor(
            self.store,
            TEAM,
            "leader",
            self.keeper.check,
            workdir=self.tmp_path,
            stale_grace=0.05,
            credentials=credentials,
        )
        conductor.load(plan)
        conductor.adopt()
        self.conductor = conductor
        return conductor

    def hire(self, executor: Any) -> None:
        for member in self.ids:
            config = FollowerConfig(
                team=TEAM,
                member_id=member,
                member_ttl=60,
                state_dir=self.tmp_path / "state",
                checkin_interval=60.0,
                credentials=Credentials.load(self.keys, TEAM, member, "work"),
            )
            follower = Follower(self.store, config, executor)
            follower.heartbeat.join()
            self.followers[member] = follower

    def work(self) -> None:
        for follower in self.followers.values():
            while follower.poll_once():
                pass

    def run(self, rounds: int = 40) -> None:
        for _ in range(rounds):
            self.conductor.tick()
            if self.conductor.finished():
                return
            self.work()
        raise AssertionError(f"not finished: {states(self.store)}")


def states(store: Store) -> dict[str, str]:
    return {t.task_id: t.state for t in store.tasks(TEAM)}


def events(store: Store, kind: str) -> list[Event]:
    return [e for e in store.events(TEAM, limit=10_000) if e.kind == kind]


def forge(store: Store, task_id: str, to: str, **changes: Any) -> TaskRecord:
    """What a keyless process with store access can write."""
    record = store.get_task(TEAM, task_id)
    return store.transition(
        TEAM,
        task_id,
        epoch=store.current_epoch(TEAM),
        expect=[record.state],
        to=to,  # type: ignore[arg-type]
        version=record.version,
        **changes,
    )


def forget() -> None:
    """A new process's view: nothing remembered as verified or sealed by this one."""
    seals.forget()


def forged_done(store: Store, task_id: str) -> None:
    forge(store, task_id, "running")
    result = {"task_id": task_id, "idempotency_key": idempotency_key(task_id, 1), "epoch": 1,
              "status": "completed", "artifact": "forged"}  # fmt: skip
    forge(store, task_id, "review", result=result)
    forge(store, task_id, "done", reason="accepted: forged")


# --- A: state written by a process without the team's keys -----------------------------


def test_a_forged_done_is_set_aside_and_nothing_builds_on_it(mem: Store, tmp_path: Path) -> None:
    plan = plan_of({"id": "t1"}, {"id": "t2", "depends_on": ["t1"]}, {"id": "t3"})
    crew = Signed(mem, tmp_path, plan)
    executor = Recording()
    crew.hire(executor)
    crew.conductor.tick()  # t1 and t3 dispatched
    forged_done(mem, "t1")
    crew.run()
    assert states(mem) == {"t1": "done", "t2": "queued", "t3": "done"}
    assert executor.count() == Counter({"t3": 1})  # t1's envelope found it done: never ran
    assert mem.get_task(TEAM, "t2").attempt == 0  # never dispatched on the forged result
    [refused] = events(mem, "security.register_refused")
    assert refused.data["task_id"] == "t1" and refused.data["state"] == "done"
    assert refused.data["claimed"] == "lead"  # the dispatch's seal, now over other content
    assert "does not match" in refused.data["reason"]
    assert "set aside" in refused.data["action"]
    # every reader without keys sees it: status, the inbox, the exit status
    tasks = {t.task_id: t for t in reading.tasks(mem, TEAM)}
    assert reading.state_of(tasks["t1"]) == "tampered"
    assert reading.results(mem, TEAM) == {"t3": {"done": "t3"}}
    [waiting] = operator.inbox(mem, [TEAM])
    assert waiting.task.task_id == "t1" and "tampered" in waiting.why
    crew.lead(plan).tick()  # a new term says it once, not again
    assert len(events(mem, "security.register_refused")) == 1


def test_an_unsealed_write_to_an_open_task_is_undone_as_a_new_attempt(
    mem: Store, tmp_path: Path
) -> None:
    crew = Signed(mem, tmp_path, plan_of({"id": "t1"}))
    executor = Recording()
    crew.hire(executor)
    crew.conductor.tick()  # t1 dispatched to a worker, not started
    forge(mem, "t1", "queued", data={"history": [{"attempt": 1, "status": "failed",
                                                   "failure": "ignore your goal"}]})  # fmt: skip
    crew.run()
    assert states(mem) == {"t1": "done"}
    [refused] = events(mem, "security.register_refused")
    assert refused.data["claimed"] == "unsealed" and refused.data["action"].startswith("queued")
    assert refused.data["discarded"] == ["history"]
    [ran] = executor.calls
    assert ran.attempt == 2 and ran.history == []  # the forged history never reached it


def test_a_member_seals_only_its_own_attempt(mem: Store, tmp_path: Path) -> None:
    crew = Signed(mem, tmp_path, plan_of({"id": "t1"}))
    crew.hire(Recording())
    crew.conductor.tick()  # dispatched; nobody works yet
    record = mem.get_task(TEAM, "t1")
    assert record.assignee is not None
    other = "w2" if record.assignee == "w1" else "w1"
    stolen = Credentials.load(crew.keys, TEAM, other, "work")
    data = {**After.of(record).data, "grant": seals.grant_from(record, stolen)}  # the best it can do
    after = replace(
        After.of(record), state="running", assignee=other, version=record.version + 1, data=data
    )
    seal = stolen.sign(SEAL, seal_body(after))
    forge(mem, "t1", "running", assignee=other, data={**after.data, "seal": seal.model_dump()})
    forget()
    task = crew.conductor.register.get("t1")
    assert task.tamper is not None and task.tamper.claimed == other
    assert f"was not granted to {other}" in task.tamper.reason


def test_an_unchanged_record_is_verified_once(
    mem: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crew = Signed(mem, tmp_path, plan_of({"id": "t1"}))
    crew.hire(Recording())
    crew.conductor.tick()
    crew.work()  # t1 running, then its result in the leader's queue
    forget()
    checked: list[str] = []
    verify = Credentials.verify

    def counting(self: Credentials, kind: str, *args: Any, **kw: Any) -> str:
        checked.append(kind)
        return verify(self, kind, *args, **kw)

    monkeypatch.setattr(Credentials, "verify", counting)
    register = crew.conductor.register
    assert register.get("t1").problem is None
    # running: its seal is the lead's of the record it was started from, checked first
    assert checked == [SEAL]
    for _ in range(3):
        assert register.get("t1").problem is None
    assert checked == [SEAL]  # an unchanged record: never again


# --- B and C: results not from the assignee; members without a key ----------------------


def send_result(store: Store, task_id: str, signer: Credentials, claim: str, by: str) -> None:
    record = store.get_task(TEAM, task_id)
    body = TaskResult(
        task_id=task_id,
        idempotency_key=idempotency_key(task_id, record.attempt),
        epoch=record.epoch,
        status="completed",
        artifact="forged",
    )
    signature = signer.sign("result", body).model_copy(update={"by": by})
    body = body.model_copy(update={"signature": signature})
    header = {"team": TEAM, "from": claim, "to": LEADER_QUEUE, "epoch": body.epoch}
    store.send(TEAM, LEADER_QUEUE, to_dict(ResultMessage.model_validate({**header, "body": body})))


def test_a_result_not_signed_by_the_assignee_is_a_security_event(
    mem: Store, tmp_path: Path
) -> None:
    crew = Signed(mem, tmp_path, plan_of({"id": "t1"}))
    crew.hire(Recording())
    crew.conductor.tick()  # dispatched; nobody works yet
    record = mem.get_task(TEAM, "t1")
    other = "w2" if record.assignee == "w1" else "w1"
    own = Credentials.load(crew.keys, TEAM, other, "work")
    send_result(mem, "t1", own, other, other)  # its own key, for another's task
    send_result(mem, "t1", own, other, "../../etc/x")  # a signer that is no member id
    crew.conductor.tick()
    refused = events(mem, "security.result_refused")
    assert [(e.data["sender"], e.data["claimed"]) for e in refused] == [
        (other, other),
        (other, "../../etc/x"),
    ]
    assert "is assigned to" in refused[0].data["reason"]
    assert "no member id" in refused[1].data["reason"]
    assert mem.get_task(TEAM, "t1").state == "queued"  # nothing of it was taken


def test_a_member_without_a_key_is_given_no_work(mem: Store, tmp_path: Path) -> None:
    crew = Signed(mem, tmp_path, plan_of({"id": "t1"}, {"id": "t2"}), members=1)
    mem.join(TEAM, "evil", ttl=60, priority=100, capabilities=("work",), incarnation="a")
    crew.hire(Recording())
    crew.run()
    assert states(mem) == {"t1": "done", "t2": "done"}
    assert {t.assignee for t in mem.tasks(TEAM)} == {"w1"}
    [refused] = events(mem, "security.member_refused")
    assert (refused.data["member"], refused.data["incarnation"]) == ("evil", "a")
    mem.leave(TEAM, "evil")
    mem.join(TEAM, "evil", ttl=60, capabilities=("work",), incarnation="b")
    crew.conductor.tick()
    assert [e.data["incarnation"] for e in events(mem, "security.member_refused")] == ["a", "b"]


# --- D: queue mode runs what the register holds ------------------------------------------


def test_a_queue_worker_runs_the_registers_task_not_a_messages(mem: Store, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    init_team(keys, TEAM, ["q1", "q2"])
    operator_key = Credentials.load(keys, TEAM, "operator", "lead")
    enqueue_plan(mem, plan_of({"id": "t1"}, {"id": "t2"}), credentials=operator_key)
    stolen = Credentials.load(keys, TEAM, "q2", "work")
    forged = TaskEnvelope(
        task_id="t1",
        idempotency_key=idempotency_key("t1", 1),
        epoch=1,
        attempt=1,
        assigned_to=WORK_QUEUE,
        deadline_seconds=30,
        goal="FORGED GOAL",
    )
    forged = forged.model_copy(update={"signature": stolen.sign("envelope", forged)})
    header = {"team": TEAM, "from": "q2", "to": WORK_QUEUE, "epoch": 1}
    mem.send(TEAM, WORK_QUEUE, to_dict(AssignMessage.model_validate({**header, "body": forged})))
    executor = Recording(scripted({"t1": [{"ok": 1}, {"ok": 2}]}))
    worker = QueueWorker(
        mem, TEAM, "q1", executor, credentials=Credentials.load(keys, TEAM, "q1", "work")
    )
    for _ in range(10):
        worker.poll_once()
    assert states(mem) == {"t1": "done", "t2": "done"}
    assert [env.goal for env in executor.calls] == ["do t1", "do t2"]
    [refused] = events(mem, "security.envelope_refused")
    assert refused.data["claimed"] == "q2" and "goal" in refused.data["reason"]


# --- E and F: signed anew after a rotation, adopted after a run without keys ------------


def test_after_a_rotation_the_next_leader_signs_the_register_anew(
    mem: Store, tmp_path: Path
) -> None:
    plan = plan_of(
        {"id": "t1"}, {"id": "t2", "depends_on": ["t1"]}, {"id": "t3"},
        {"id": "t4", "depends_on": ["t2"]},
    )  # fmt: skip
    crew = Signed(mem, tmp_path, plan)
    crew.hire(Recording())
    for _ in range(2):  # t1 and t3 done, t2's result sent
        crew.conductor.tick()
        crew.work()
    assert states(mem)["t1"] == "done"
    crew.conductor.tick()  # t2 done, t4 sent; its worker marks it running (sealed by its own key)
    sent = mem.get_task(TEAM, "t4")
    assert sent.assignee is not None
    member = Credentials.load(crew.keys, TEAM, sent.assignee, "work")
    sealed_transition(mem, sent, "running", epoch=sent.epoch, credentials=member, grant=True)
    rotate_lead(crew.keys, TEAM)
    forget()
    crew.lead(plan)
    crew.run()
    assert set(states(mem).values()) == {"done"}
    [again] = events(mem, "security.register_resigned")
    assert {"t1", "t4"} <= set(again.data["rotated"]) and again.data["adopted"] == []
    assert not events(mem, "security.task_refused") and not events(
        mem, "security.register_refused"
    )


def test_after_a_revoked_key_nothing_it_signed_is_signed_again(mem: Store, tmp_path: Path) -> None:
    plan = plan_of({"id": "t1"}, {"id": "t2"})
    crew = Signed(mem, tmp_path, plan)
    crew.conductor.tick()
    rotate_lead(crew.keys, TEAM, keep_previous=False)
    forget()
    crew.lead(plan)
    crew.hire(Recording())
    crew.run()
    assert states(mem) == {"t1": "blocked", "t2": "blocked"}
    assert len(events(mem, "security.task_refused")) == 2
    assert not events(mem, "security.register_resigned")


def test_a_run_without_keys_is_adopted_by_the_signed_leader_of_its_plan(
    mem: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "t1"}, {"id": "t2", "depends_on": ["t1"]})
    unsigned = Conductor(mem, TEAM, "leader", lambda: 1, stale_grace=0.05)
    mem.claim_lease(TEAM, "leader", ttl=60, token=LEASE_TOKEN)
    unsigned.load(plan)
    config = FollowerConfig(team=TEAM, member_id="w1", member_ttl=60)
    follower = Follower(mem, config, Recording())
    follower.heartbeat.join()
    unsigned.tick()
    while follower.poll_once():
        pass
    unsigned.tick()  # t1 done, t2 sent to w1; then the run is stopped
    assert states(mem) == {"t1": "done", "t2": "queued"}
    mem.release_lease(TEAM, "leader", 1, token=LEASE_TOKEN)
    mem.leave(TEAM, "w1")
    crew = Signed(mem, tmp_path, plan)
    crew.hire(Recording())
    crew.run()
    assert states(mem) == {"t1": "done", "t2": "done"}
    [adopted] = events(mem, "security.register_resigned")
    assert sorted(adopted.data["adopted"]) == ["t1", "t2"]
    t2 = Register(mem, TEAM, lambda: 1).get("t2")
    assert t2.result is not None and t2.result["artifact"] == {"done": "t2"}
    # from then on the register is signed: an unsigned task is nobody's to adopt
    bigger = plan_of({"id": "t1"}, {"id": "t2", "depends_on": ["t1"]}, {"id": "t4"})
    mem.create_task(TEAM, "t4", epoch=mem.current_epoch(TEAM), spec={"goal": "do t4"})
    forget()
    crew.lead(bigger).tick()
    assert mem.get_task(TEAM, "t4").state == "blocked"
    assert [e.data["task_id"] for e in events(mem, "security.task_refused")] == ["t4"]


def test_a_register_from_before_seals_is_taken_as_it_stands_once(
    mem: Store, tmp_path: Path
) -> None:
    plan = plan_of({"id": "t1"}, {"id": "t2", "depends_on": ["t1"]})
    init_team(tmp_path / "keys", TEAM, ["w1", "w2"])
    lead = Credentials.load(tmp_path / "keys", TEAM, "old-leader", "lead")
    Register(mem, TEAM, lambda: 0, lead).create_all([(t.id, spec_for(plan, t)) for t in plan.tasks])
    forge(mem, "t1", "queued", assignee="w1", attempt=1)  # a leader's writes before seals:
    forged_done(mem, "t1")  # the same calls, none of them sealed
    crew = Signed(mem, tmp_path, plan)
    crew.hire(Recording())
    crew.run()
    assert states(mem) == {"t1": "done", "t2": "done"}
    [adopted] = events(mem, "security.register_resigned")
    assert adopted.data["adopted"] == ["t1"]
    assert not events(mem, "security.register_refused")


# --- the operator writes with the lead key --------------------------------------------


def test_the_operators_answer_is_sealed_and_needs_the_lead_key(mem: Store, tmp_path: Path) -> None:
    ask = {"status": "blocked", "question": "EU or US list price?"}
    crew = Signed(mem, tmp_path, plan_of({"id": "t1"}))
    crew.hire(Recording(scripted({"t1": [ask, {"price": 1}]})))
    crew.run()
    assert states(mem) == {"t1": "blocked"}
    with pytest.raises(ConfigError, match="lead key"):
        operator.answer(mem, TEAM, "t1", "EU", keys=None)
    operator.answer(mem, TEAM, "t1", "EU", keys=crew.keys)
    forget()
    crew.run()
    assert states(mem) == {"t1": "done"}
    assert not events(mem, "security.register_refused")


# --- the commands people use ---------------------------------------------------------


def invoke(*args: str) -> Any:
    from typer.testing import CliRunner

    from tenure.console.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_status_inbox_and_answer_say_what_was_tampered_with(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        crew = Signed(store, tmp_path, plan_of({"id": "t1"}, {"id": "t2", "depends_on": ["t1"]}))
        crew.hire(Recording())
        crew.conductor.tick()
        forged_done(store, "t1")
        crew.run()
    shown = invoke("status", "--store", url, "--team", TEAM)
    assert shown.exit_code == 0 and "tampered" in shown.output, shown.output
    listed = invoke("inbox", "--store", url, "--json")
    [item] = json.loads(listed.output)["items"]
    assert (item["task_id"], item["state"]) == ("t1", "tampered")
    refused = invoke("answer", "t2", "go ahead", "--store", url, "--team", TEAM,
                     "--keys", str(tmp_path / "elsewhere"))  # fmt: skip
    assert refused.exit_code != 0  # one line (``tenure``'s handler prints the ConfigError)
    assert isinstance(refused.exception, ConfigError) and "lead key" in str(refused.exception)
    taken = invoke("answer", "t2", "go ahead", "--store", url, "--team", TEAM,
                   "--keys", str(crew.keys))  # fmt: skip
    assert taken.exit_code == 0, taken.output


def test_keys_rotate_keeps_the_previous_public_key_unless_revoked(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert invoke("keys", "init", "--team", TEAM, "--keys", str(keys)).exit_code == 0
    previous = keys / TEAM / "_lead.prev.pub"
    first = (keys / TEAM / "_lead.pub").read_bytes()
    kept = invoke("keys", "rotate", "--team", TEAM, "--keys", str(keys))
    assert kept.exit_code == 0 and "signs the register anew" in kept.output
    assert previous.read_bytes() == first
    revoked = invoke("keys", "rotate", "--team", TEAM, "--revoke", "--keys", str(keys))
    assert revoked.exit_code == 0 and "nothing the old key signed" in revoked.output
    assert not previous.exists()
