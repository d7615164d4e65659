"""Nested teams in one process on a real store: plan validation, the sub-leader's
roll-up, a whole nested plan end to end, adoption of a half-run child team, and a
sub-leader whose attempt was superseded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import LEASE_TOKEN
from ghost_member import ghost_takes_attempt
from tenure.coord import Credentials, LeaseKeeper, LeaseProofs, LeaseTiming
from tenure.coord.credentials import init_team
from tenure.executors import TaskContext, coerce_result, make_result
from tenure.protocol import Plan, ProtocolError, TaskEnvelope, TaskResult, parse_plan
from tenure.protocol.envelope import Spend
from tenure.protocol.plan import SUBTEAM_CAPABILITY, team_tree
from tenure.protocol.taskspec import SpendEntry, spec_for
from tenure.roles import Follower, FollowerConfig, Leader, LeaderConfig, envelope_for
from tenure.roles.features.nested import NestedTeamsHook, nested_spend, rollup, stale_report
from tenure.roles.leader import Conductor
from tenure.roles.register import read_task
from tenure.roles.teams import child_plan, sub_leader
from tenure.store import ManualClock, Store, TaskRecord, open_store
from tenure.store.memory import MemoryStore

PARENT = "acme/research"
CHILD = "acme/research/pricing"
TIMING = LeaseTiming(ttl=2.0)


class Counting:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        with self.lock:
            self.calls[f"{ctx.team}:{envelope.task_id}"] += 1
        deps = envelope.input.get("from_dependencies", {})
        return coerce_result(envelope, {"done": envelope.task_id, "deps": sorted(deps)})


def nested(**child: Any) -> Plan:
    return Plan.model_validate(
        {
            "team": PARENT,
            "tasks": [
                {"id": "scope", "goal": "scope"},
                {
                    "id": "pricing",
                    "goal": "price every vendor",
                    "depends_on": ["scope"],
                    "deadline_seconds": 60,
                    "team": {
                        "tasks": [
                            {"id": "fetch", "goal": "fetch"},
                            {"id": "compare", "goal": "compare", "depends_on": ["fetch"]},
                        ],
                        **child,
                    },
                },
                {"id": "report", "goal": "report", "depends_on": ["pricing"]},
            ],
        }
    )


def test_nested_plans_validate_recursively_and_name_the_path() -> None:
    plan = nested(max_attempts=5)
    assert plan.tasks[1].capability == SUBTEAM_CAPABILITY
    assert [p.team for p in team_tree(plan)] == [PARENT, CHILD]
    assert team_tree(plan)[1].max_attempts == 5
    bad = """
team: acme
tasks:
  - {id: a, goal: x}
  - id: b
    goal: y
    team:
      tasks:
        - {id: q, goal: g}
        - {id: r, goal: g, depends_on: [q, zz]}
"""
    with pytest.raises(ProtocolError, match=r"tasks\[1\]\.team\.tasks\[1\]\.depends_on"):
        parse_plan(bad, source="plan.yaml")
    cycle = bad.replace("depends_on: [q, zz]", "depends_on: [r]")
    with pytest.raises(ProtocolError, match=r"tasks\[1\]\.team\.tasks\[1\]\.depends_on"):
        parse_plan(cycle, source="plan.yaml")
    clash = """
team: acme
tasks:
  - {id: a, goal: x, team: {name: acme/x, tasks: [{id: q, goal: g}]}}
  - {id: b, goal: y, team: {name: acme/x, tasks: [{id: q, goal: g}]}}
"""
    with pytest.raises(ProtocolError, match=r"tasks\[1\]\.team\.name"):
        parse_plan(clash, source="plan.yaml")
    deep = (
        "team: a/b/c/d/e/f/g/h\ntasks:\n  - {id: t, goal: x, team: {tasks: [{id: q, goal: g}]}}\n"
    )
    with pytest.raises(ProtocolError, match=r"tasks\[0\]\.team\.name"):
        parse_plan(deep, source="plan.yaml")


def test_child_plan_comes_from_the_register_spec(store: Store) -> None:
    plan = nested()
    child = child_plan(PARENT, spec_for(plan, plan.tasks[1]))
    assert child is not None and child.team == CHILD
    assert [t.id for t in child.tasks] == ["fetch", "compare"]
    assert child_plan(PARENT, spec_for(plan, plan.tasks[0])) is None


class Tree:
    """A parent leader, sub-leader candidates and child workers as threads."""

    def __init__(
        self,
        store: Store,
        tmp_path: Path,
        plan: Plan,
        sub_leaders: int = 2,
        executor: Counting | None = None,
    ) -> None:
        self.store = store
        self.plan = plan
        self.executor = executor or Counting()
        self.stop = threading.Event()
        self.members: list[Follower] = []
        for n in range(1, sub_leaders + 1):
            config = self._config(PARENT, f"sub-{n}", tmp_path)
            self.members.append(sub_leader(store, config, self.executor, timing=TIMING))
        for n in range(1, 3):
            config = self._config(CHILD, f"child-w{n}", tmp_path)
            self.members.append(Follower(store, config, self.executor))
        self.threads = [
            threading.Thread(target=m.run, args=(self.stop,), daemon=True) for m in self.members
        ]
        self.leader = Leader(
            store,
            LeaderConfig(
                team=PARENT,
                member_id="top",
                timing=TIMING,
                elect=False,
                state_dir=tmp_path,
                poll_interval=0.01,
                stale_grace=0.5,
            ),
            plan,
        )

    @staticmethod
    def _config(team: str, member: str, tmp_path: Path) -> FollowerConfig:
        return FollowerConfig(
            team=team, member_id=member, state_dir=tmp_path, poll_interval=0.01, member_ttl=2.0
        )

    def run(self, timeout: float = 30.0) -> str:
        for thread in self.threads:
            thread.start()
        leader_stop = threading.Event()
        timer = threading.Timer(timeout, leader_stop.set)
        timer.start()
        try:
            return self.leader.lead(leader_stop)
        finally:
            timer.cancel()
            self.stop.set()
            for thread in self.threads:
                thread.join(timeout=10)


def test_a_nested_plan_runs_and_reports_one_rolled_up_result(store: Store, tmp_path: Path) -> None:
    tree = Tree(store, tmp_path, nested())
    assert tree.run() == "settled"
    parent = {t.task_id: t for t in store.tasks(PARENT)}
    assert {t.state for t in parent.values()} == {"done"}
    assert {t.state for t in store.tasks(CHILD)} == {"done"}
    artifact = (parent["pricing"].result or {})["artifact"]
    assert artifact["team"] == CHILD
    assert artifact["states"] == {"done": 2}
    assert artifact["tasks"]["compare"]["artifact"] == {"done": "compare", "deps": ["fetch"]}
    # the task after the composite one sees the roll-up as its dependency
    report = (parent["report"].result or {})["artifact"]
    assert report == {"done": "report", "deps": ["pricing"]}
    # every child ran exactly once, and only in the child team; the composite task
    # was never given to the plain executor
    assert tree.executor.calls == Counter(
        {f"{PARENT}:scope": 1, f"{PARENT}:report": 1, f"{CHILD}:fetch": 1, f"{CHILD}:compare": 1}
    )
    # each team has its own lease and epoch counter
    assert store.current_epoch(CHILD) >= 1
    assert store.current_epoch(PARENT) >= 1


def test_a_new_sub_leader_adopts_the_child_register(store: Store, tmp_path: Path) -> None:
    """A child team half run under an earlier sub-leader is adopted, not rerun."""
    plan = nested()
    child = child_plan(PARENT, spec_for(plan, plan.tasks[1]))
    assert child is not None
    executor = Counting()
    worker = Follower(store, Tree._config(CHILD, "child-w0", tmp_path), executor)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    first = Leader(
        store,
        LeaderConfig(
            team=CHILD, member_id="old-sub", timing=TIMING, elect=False, poll_interval=0.01
        ),
        child,
    )
    first_stop = threading.Event()
    runner = threading.Thread(target=first.run, args=(first_stop,), daemon=True)
    runner.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if any(t.task_id == "fetch" and t.state == "done" for t in store.tasks(CHILD)):
            break
        time.sleep(0.01)
    first_stop.set()
    runner.join(timeout=5)
    stop.set()
    thread.join(timeout=5)
    assert store.get_task(CHILD, "fetch").state == "done"
    old_epoch = store.current_epoch(CHILD)

    tree = Tree(store, tmp_path, plan)
    assert tree.run() == "settled"
    assert {t.state for t in store.tasks(PARENT)} == {"done"}
    assert f"{CHILD}:fetch" not in tree.executor.calls  # adopted, not run again
    assert tree.executor.calls[f"{CHILD}:compare"] <= 1
    assert store.current_epoch(CHILD) > old_epoch


NESTED_PLAN = """
team: acme/research
tasks:
  - {id: scope, goal: List the vendors.}
  - id: pricing
    goal: Price every vendor.
    depends_on: [scope]
    deadline_seconds: 60
    team:
      tasks:
        - {id: fetch, goal: Fetch the pages.}
        - {id: compare, goal: Compare the prices., depends_on: [fetch]}
  - {id: report, goal: Write the report., depends_on: [pricing]}
"""


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("TENURE_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_a_nested_plan_runs_from_the_cli_and_status_shows_the_tree(
    store_url: str, tmp_path: Path
) -> None:
    (tmp_path / "plan.yaml").write_text(NESTED_PLAN)
    result = cli(tmp_path, "run", "plan.yaml", "--store", store_url, "--workers", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "acme/research: 3 done" in result.stdout
    with open_store(store_url) as store:
        assert {t.task_id: t.state for t in store.tasks(CHILD)} == {
            "fetch": "done",
            "compare": "done",
        }
    status = cli(tmp_path, "status", "--store", store_url)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    [root] = [line for line in lines if "│ acme/research " in line]
    [child] = [line for line in lines if "│   pricing " in line]
    assert "3 done" in root and "2 done" in child
    only = cli(tmp_path, "status", "--store", store_url, "--team", CHILD)
    assert "team acme/research/pricing" in only.stdout
    assert "team acme/research —" not in only.stdout


def test_local_and_queue_modes_refuse_a_nested_plan(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(NESTED_PLAN)
    for mode in ("local", "queue"):
        result = cli(tmp_path, "run", "plan.yaml", "--mode", mode)
        assert result.returncode != 0
        assert "--mode team" in result.stdout + result.stderr


def test_run_refuses_a_bad_nested_executor_naming_its_path(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        "team: acme\ntasks:\n  - id: sub\n    goal: g\n    team:\n      tasks:\n"
        "        - {id: q, goal: g, executor: teleport}\n"
    )
    result = cli(tmp_path, "run", "plan.yaml")
    assert result.returncode != 0
    assert "tasks[0].team.tasks[0].executor" in result.stdout + result.stderr
    assert not (tmp_path / ".tenure" / "state.db").exists()


def test_the_nested_example_plan_loads() -> None:
    from tenure.protocol import load_plan

    path = Path(__file__).resolve().parents[2] / "examples" / "nested-teams" / "plan.yaml"
    plan = load_plan(path)
    assert [p.team for p in team_tree(plan)] == [
        "acme/research",
        "acme/research/pricing",
        "acme/research/survey",
    ]


def test_the_nested_example_runs_twice_in_one_directory(tmp_path: Path) -> None:
    """As its README runs it; the second run finds every task done and says so."""
    path = Path(__file__).resolve().parents[2] / "examples" / "nested-teams" / "plan.yaml"
    said = []
    for _ in range(2):
        result = cli(tmp_path, "run", str(path), "--store", "sqlite:///nested.db", "--workers", "2")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        said.append(result.stdout)
    assert "acme/research: 4 done" in said[0]
    assert "acme/research: 4 tasks already done" in said[1] and "nothing to do" in said[1]


class Spending(Counting):
    """Each child task reports model spend; the parent's tasks report none."""

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        result = super().execute(envelope, ctx)
        if ctx.team != CHILD:
            return result
        usage = {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01, "calls": 1}
        return result.model_copy(update={"usage": Spend.model_validate(usage)})


def test_the_parent_budget_counts_the_nested_teams_spend(store: Store, tmp_path: Path) -> None:
    tree = Tree(store, tmp_path, nested(), executor=Spending())
    assert tree.run() == "settled"
    pricing = store.get_task(PARENT, "pricing")
    [entry] = [e for e in pricing.data["spend_log"] if not e.get("kind")]
    assert (entry["input_tokens"], entry["output_tokens"], entry["calls"]) == (20, 10, 2)
    assert entry["cost_usd"] == pytest.approx(0.02)


def test_nested_spend_is_reported_once_across_attempts() -> None:
    def record(**spend: float) -> TaskRecord:
        return TaskRecord(
            team=CHILD,
            task_id="x",
            state="done",
            version=1,
            epoch=1,
            attempt=1,
            assignee=None,
            spec={"id": "x", "goal": "g"},
            result=None,
            reason="",
            data={"spend_log": [spend]},
            created_at=0.0,
            updated_at=0.0,
        )

    tasks = [read_task(record(input_tokens=10, cost_usd=0.5, calls=1))] * 2
    assert nested_spend(tasks, []) == Spend(input_tokens=20, cost_usd=1.0, calls=2)
    earlier = [SpendEntry(attempt=1, input_tokens=20, cost_usd=1.0, calls=2)]
    assert nested_spend(tasks, earlier) is None
    assert nested_spend([], []) is None


# --- a sub-leader that waits for the operator --------------------------------------------


class AsksOnce(Counting):
    """The child task ``fetch`` asks the operator until it has an answer."""

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        if (ctx.team, envelope.task_id) == (CHILD, "fetch") and not envelope.input.get(
            "operator_answers"
        ):
            with self.lock:
                self.calls[f"{ctx.team}:{envelope.task_id}"] += 1
            return make_result(envelope, "blocked", question="which vendors count?")
        return super().execute(envelope, ctx)


def test_a_child_question_blocks_the_composite_task_and_its_answer_resumes_it(
    store_url: str, tmp_path: Path
) -> None:
    executor = AsksOnce()
    with open_store(store_url) as store:
        assert Tree(store, tmp_path, nested(), executor=executor).run() == "settled"
        pricing = store.get_task(PARENT, "pricing")
        # blocked, not failed: the parent's inbox says which child waits and how to answer
        assert (pricing.state, pricing.attempt) == ("blocked", 1)
        question = pricing.data["question"]
        assert "fetch" in question and f'tenure answer --team {CHILD} fetch "..."' in question
        assert store.get_task(CHILD, "fetch").state == "blocked"
        assert store.get_task(PARENT, "report").state == "queued"  # behind the question
    inbox = cli(tmp_path, "inbox", "--store", store_url)
    assert "pricing" in inbox.stdout and "fetch" in inbox.stdout

    answered = cli(
        tmp_path, "answer", "fetch", "the EU ones", "--team", CHILD, "--store", store_url
    )
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert f"re-queued pricing in {PARENT}" in answered.stdout
    with open_store(store_url) as store:
        pricing = store.get_task(PARENT, "pricing")
        assert (pricing.state, pricing.assignee) == ("queued", None)
        assert "question" not in pricing.data

        # the next sub-leader attempt adopts the child register and runs the answered task
        assert Tree(store, tmp_path, nested(), executor=executor).run() == "settled"
        assert {t.state for t in store.tasks(PARENT)} == {"done"}
        assert {t.state for t in store.tasks(CHILD)} == {"done"}
        assert store.get_task(PARENT, "pricing").attempt == 2
        [qa] = store.get_task(CHILD, "fetch").data["qa"]
        assert qa == {"question": "which vendors count?", "answer": "the EU ones"}
    assert executor.calls[f"{CHILD}:fetch"] == 2  # asked once, then done once
    assert executor.calls[f"{CHILD}:compare"] == 1
    assert executor.calls[f"{PARENT}:scope"] == 1


def test_answering_one_of_two_waiting_children_keeps_the_parent_waiting(
    store_url: str, tmp_path: Path
) -> None:
    from tenure.roles.teams.inbox import requeue_ancestors

    plan = nested()
    with open_store(store_url) as store:
        for task in plan.tasks:
            store.create_task(PARENT, task.id, epoch=0, spec=task.model_dump(mode="json"))
        for task_id in ("fetch", "compare"):
            store.create_task(CHILD, task_id, epoch=0, spec={"goal": task_id}, state="blocked")
        store.transition(PARENT, "pricing", epoch=0, expect=["queued"], to="blocked")
        fetch = store.get_task(CHILD, "fetch")
        store.transition(
            CHILD, "fetch", epoch=0, expect=["blocked"], to="queued", version=fetch.version
        )
        assert requeue_ancestors(store, CHILD, "fetch") == []  # compare still waits
        compare = store.get_task(CHILD, "compare")
        store.transition(
            CHILD, "compare", epoch=0, expect=["blocked"], to="queued", version=compare.version
        )
        assert requeue_ancestors(store, CHILD, "compare") == [(PARENT, "pricing")]
        assert store.get_task(PARENT, "pricing").state == "queued"
        assert store.get_task(PARENT, "scope").state == "queued"  # untouched


# --- a silent sub-leader replaced inside its team ----------------------------------------


def running_composite(store: Store, assignee: str) -> TaskRecord:
    """The composite task of ``nested()`` running in the parent under ``assignee``."""
    spec = nested().tasks[1].model_dump(mode="json", by_alias=True)
    store.create_task(PARENT, "pricing", epoch=0, spec=spec)
    task = store.get_task(PARENT, "pricing")
    return store.transition(
        PARENT,
        "pricing",
        epoch=0,
        expect=["queued"],
        to="running",
        assignee=assignee,
        attempt=1,
        version=task.version,
        data={"child_epoch": store.current_epoch(CHILD)},
    )


def leader_of(store: Store) -> Conductor:
    """The parent's conductor: the context the nested-teams hook is called with."""
    return Conductor(store, PARENT, "lead", lambda: 0)


def events_of(store: Store, *kinds: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in store.events(PARENT) if e.kind in kinds]


def test_the_parent_follows_the_child_lease_to_a_stand_in(store: Store) -> None:
    watch, ctx = NestedTeamsHook(grace=60), leader_of(store)
    task = running_composite(store, "gone")
    store.join(PARENT, "s2", ttl=30, capabilities=("work", SUBTEAM_CAPABILITY))
    kinds = ("leader.sub_leader_silent", "leader.sub_leader_changed")
    # the assignee is silent and nobody leads the child team yet: wait, do not retry
    assert watch.on_watch(ctx, read_task(task), store.now()) == "waiting"
    assert [k for k, _ in events_of(store, *kinds)] == ["leader.sub_leader_silent"]
    # a stand-in won the child election: the same attempt moves to it
    lease = store.claim_lease(CHILD, "s2", ttl=30, token=LEASE_TOKEN)
    current = read_task(store.get_task(PARENT, "pricing"))
    assert watch.on_watch(ctx, current, store.now()) == "moved"
    moved = store.get_task(PARENT, "pricing")
    assert (moved.state, moved.attempt, moved.assignee) == ("running", 1, "s2")
    assert moved.data["stand_in"] == "s2" and moved.data["child_epoch"] == lease.epoch
    events = events_of(store, *kinds)
    assert events[-1][0] == "leader.sub_leader_changed"
    assert events[-1][1]["from"] == "gone" and events[-1][1]["to"] == "s2"
    # a holder elected before the attempt began (an older attempt's) is not followed
    store.release_lease(CHILD, "s2", lease.epoch, token=LEASE_TOKEN)
    store.join(PARENT, "old", ttl=30)
    store.claim_lease(CHILD, "old", ttl=30, token=LEASE_TOKEN)
    again = store.transition(
        PARENT,
        "pricing",
        epoch=0,
        expect=["running"],
        to="running",
        assignee="gone",
        data={"child_epoch": store.current_epoch(CHILD)},  # as recorded at dispatch
    )
    assert watch.on_watch(ctx, read_task(again), store.now()) == "waiting"
    assert store.get_task(PARENT, "pricing").assignee == "gone"


def test_in_a_signed_team_the_parent_follows_only_a_proved_child_lease(tmp_path: Path) -> None:
    """A child lease a process with store access claimed in a live member's name moves
    nothing; the same member's proved lease does."""
    init_team(tmp_path, PARENT, ["s2"])  # a stand-in the parent team has a key for
    init_team(tmp_path, CHILD)
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    lead = Credentials.load(tmp_path, PARENT, "lead", "lead")
    ctx = Conductor(store, PARENT, "lead", lambda: 0, credentials=lead)
    watch = NestedTeamsHook(grace=60)
    running_composite(store, "gone")
    store.join(PARENT, "s2", ttl=300, capabilities=("work", SUBTEAM_CAPABILITY))
    forged = store.claim_lease(CHILD, "s2", ttl=300, token=LEASE_TOKEN)
    clock.advance(LeaseTiming().proof_grace + 1)
    task = read_task(store.get_task(PARENT, "pricing"))
    assert watch.on_watch(ctx, task, store.now()) == "waiting"
    assert store.get_task(PARENT, "pricing").assignee == "gone"
    [refused] = [e for e in store.events(PARENT) if e.kind == "security.lease_refused"]
    assert refused.data["team"] == CHILD
    assert (refused.data["claimed"], refused.data["epoch"]) == ("s2", forged.epoch)
    child_lead = Credentials.load(tmp_path, CHILD, "s2", "lead")
    keeper = LeaseKeeper(store, CHILD, "s2", LeaseTiming(ttl=300), proofs=LeaseProofs.of(child_lead))
    keeper.seize(forged)  # the stand-in's own candidate takes the forged lease over
    task = read_task(store.get_task(PARENT, "pricing"))
    assert watch.on_watch(ctx, task, store.now()) == "moved"
    assert store.get_task(PARENT, "pricing").assignee == "s2"


def test_with_nobody_standing_in_the_parent_retries_after_the_grace(store: Store) -> None:
    watch, ctx = NestedTeamsHook(grace=5), leader_of(store)
    task = read_task(running_composite(store, "gone"))
    now = store.now()
    assert watch.on_watch(ctx, task, now) == "waiting"
    assert watch.on_watch(ctx, task, now + 4) == "waiting"
    assert watch.on_watch(ctx, task, now + 6) is None  # supervise retries it as a new attempt
    flat = store.create_task(PARENT, "flat", epoch=0, spec={"id": "flat", "goal": "g"})
    assert watch.on_watch(ctx, read_task(flat), now) is None


def test_a_roll_up_under_an_old_child_epoch_is_refused(store: Store) -> None:
    task = read_task(running_composite(store, "s1"))
    old = store.claim_lease(CHILD, "s1", ttl=30, token=LEASE_TOKEN)
    store.release_lease(CHILD, "s1", old.epoch, token=LEASE_TOKEN)
    store.claim_lease(CHILD, "s2", ttl=30, token=LEASE_TOKEN)
    env = envelope_for(task, epoch=1, assignee="s1")
    stale = rollup(env, CHILD, [], team_epoch=old.epoch)
    assert "which is at epoch" in (stale_report(store, PARENT, task, stale) or "")
    fresh = rollup(env, CHILD, [], team_epoch=old.epoch + 1)
    assert stale_report(store, PARENT, task, fresh) is None


def test_a_stand_in_leads_the_child_team_for_the_same_attempt(store: Store, tmp_path: Path) -> None:
    """The parent gives the composite task to a member that claims the child lease and
    dies; an idle sub-leader stands in, the parent moves the attempt, one result."""
    plan = Plan.model_validate(
        {"team": PARENT, "tasks": [{**nested().tasks[1].model_dump(mode="json"), "depends_on": []}]}
    )
    executor = Counting()
    stop = threading.Event()
    members = [
        sub_leader(store, Tree._config(PARENT, "sub-2", tmp_path), executor, timing=TIMING),
        Follower(store, Tree._config(CHILD, "child-w1", tmp_path), executor),
    ]
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True) for m in members]
    store.join(PARENT, "ghost", ttl=1.0, priority=10, capabilities=("work", SUBTEAM_CAPABILITY))
    leader = Leader(
        store,
        LeaderConfig(
            team=PARENT,
            member_id="top",
            timing=TIMING,
            elect=False,
            state_dir=tmp_path,
            poll_interval=0.01,
            stale_grace=3.0,
        ),
        plan,
    )
    leader_stop = threading.Event()
    outcome: list[str] = []
    runner = threading.Thread(target=lambda: outcome.append(leader.lead(leader_stop)), daemon=True)
    for thread in [*threads, runner]:
        thread.start()
    try:
        ghost_takes_attempt(store, PARENT, "pricing", seconds=20)
        ghost_epoch = store.claim_lease(CHILD, "ghost", ttl=1.0, token=LEASE_TOKEN).epoch
        # ... and the ghost dies: no more heartbeats, no renewals
        runner.join(timeout=40)
        assert outcome == ["settled"]
    finally:
        leader_stop.set()
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    pricing = store.get_task(PARENT, "pricing")
    assert (pricing.state, pricing.attempt, pricing.assignee) == ("done", 1, "sub-2")
    assert store.current_epoch(CHILD) > ghost_epoch
    assert (pricing.result or {})["artifact"]["team_epoch"] == store.current_epoch(CHILD)
    kinds = [e.kind for e in store.events(PARENT, limit=5000)]
    assert "leader.sub_leader_changed" in kinds and "task.retry" not in kinds
    assert executor.calls == Counter({f"{CHILD}:fetch": 1, f"{CHILD}:compare": 1})
