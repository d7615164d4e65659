"""A goal-only nested team is planned by its sub-leader's model, once, through the real
openai SDK against the local wire server, with the team on a real SQLite store."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import LEASE_TOKEN
from ghost_member import ghost_takes_attempt
from tenure.console.run_cmds import team_worker_args
from tenure.executors import TaskContext, coerce_result
from tenure.models import guard, open_model
from tenure.protocol import Plan, TaskEnvelope, TaskResult
from tenure.protocol.plan import team_tree
from tenure.protocol.taskspec import spec_for
from tenure.roles import Follower, FollowerConfig, Leader, LeaderConfig
from tenure.roles.features.nested import PLANNED, plan_once
from tenure.roles.planning import Planner
from tenure.roles.teams import child_plan, sub_leader
from tenure.store import Store, open_store

from .conftest import ServerFactory
from .test_cli_models import one_error_line, tenure, tenure_here
from .wire_server import WireServer, answer

PARENT = "acme"
CHILD = "acme/pricing"


def price(vendor: str) -> dict[str, Any]:
    return {
        "id": f"price-{vendor}",
        "goal": f"Extract {vendor}'s monthly price.",
        "input": {"page": f"vendors/{vendor}.txt"},
    }


MERGE = {
    "id": "merge",
    "goal": "Merge the prices.",
    "depends_on": ["price-acme", "price-bluefin"],
}
GOOD = {"tasks": [price("acme"), price("bluefin"), MERGE]}
INVENTED = {"tasks": [{"id": "guess", "goal": "Price zeta.", "input": {"page": "other/zeta.txt"}}]}


def goal_only_plan() -> Plan:
    return Plan.model_validate(
        {
            "team": PARENT,
            "max_attempts": 1,
            "tasks": [
                {
                    "id": "pricing",
                    "goal": "Price every vendor.",
                    "deadline_seconds": 60,
                    "team": {
                        "goal": "Price the vendors in vendors/.",
                        "artifacts": ["vendors/"],
                        "max_attempts": 2,
                    },
                }
            ],
        }
    )


class Recording:
    """The child workers' executor: records what ran, in which team."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        with self.lock:
            self.calls[f"{ctx.team}:{envelope.task_id}"] += 1
        return coerce_result(envelope, {"done": envelope.task_id})


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "vendors").mkdir()
    for vendor in ("acme", "bluefin"):
        (tmp_path / "vendors" / f"{vendor}.txt").write_text(f"{vendor}: $10/month\n")
    return tmp_path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        yield opened
    finally:
        opened.close()


def planner_on(server: WireServer) -> Planner:
    return Planner(open_model(f"openai:planner@{server.openai_url}"))


def run_tree(
    store: Store, workdir: Path, plan: Plan, planner: Planner | None, executor: Recording
) -> str:
    """The parent leader, two sub-leader candidates and two child workers as threads."""

    def config(team: str, member: str) -> FollowerConfig:
        return FollowerConfig(
            team=team,
            member_id=member,
            state_dir=workdir / ".tenure",
            workdir=workdir,
            poll_interval=0.01,
            member_ttl=2.0,
        )

    members: list[Follower] = [
        sub_leader(store, config(PARENT, f"sub-{n}"), executor, planner=planner) for n in (1, 2)
    ]
    members += [Follower(store, config(CHILD, f"w{n}"), executor) for n in (1, 2)]
    stop, leader_stop = threading.Event(), threading.Event()
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True) for m in members]
    leader = Leader(
        store,
        LeaderConfig(
            team=PARENT,
            member_id="top",
            elect=False,
            state_dir=workdir / ".tenure",
            poll_interval=0.01,
            stale_grace=0.5,
        ),
        plan,
    )
    timer = threading.Timer(60, leader_stop.set)
    for thread in threads:
        thread.start()
    timer.start()
    try:
        return leader.lead(leader_stop)
    finally:
        timer.cancel()
        stop.set()
        for thread in threads:
            thread.join(timeout=10)


def attempt_spend(store: Store) -> dict[str, Any]:
    [entry] = [e for e in store.get_task(PARENT, "pricing").data["spend_log"] if not e.get("kind")]
    return entry


def test_the_sub_leader_plans_a_goal_only_team_and_the_child_tasks_come_from_the_model(
    wire: ServerFactory, store: Store, workdir: Path
) -> None:
    server = wire([answer(GOOD)])
    executor = Recording()
    assert run_tree(store, workdir, goal_only_plan(), planner_on(server), executor) == "settled"
    pricing = store.get_task(PARENT, "pricing")
    assert pricing.state == "done"
    artifact = (pricing.result or {})["artifact"]
    assert artifact["team"] == CHILD and artifact["states"] == {"done": 3}
    assert sorted(t.task_id for t in store.tasks(CHILD)) == ["merge", "price-acme", "price-bluefin"]
    assert executor.calls == Counter(
        {f"{CHILD}:price-acme": 1, f"{CHILD}:price-bluefin": 1, f"{CHILD}:merge": 1}
    )
    # one planning call, told the section's goal and the listed artifacts
    assert len(server.requests) == 1
    prompt = server.requests[0]["messages"][-1]["content"]
    assert "Goal: Price the vendors in vendors/." in prompt and "vendors/acme.txt" in prompt
    # the section's max_attempts holds for the planned tasks
    assert {t.spec["max_attempts"] for t in store.tasks(CHILD)} == {2}
    # the planning spend travels up once, in the composite attempt's usage
    spent = attempt_spend(store)
    assert spent["calls"] == 1 and spent["input_tokens"] > 0 and spent["output_tokens"] > 0


def test_a_team_planned_by_an_earlier_sub_leader_is_adopted_without_asking_the_model(
    wire: ServerFactory, store: Store, workdir: Path
) -> None:
    """An earlier sub-leader planned the child team and died before loading it: the
    next leader of the child team adopts that plan; the model is not called again."""
    server = wire([answer(GOOD)])
    plan = goal_only_plan()
    spec = spec_for(plan, plan.tasks[0])
    child = child_plan(PARENT, spec)
    assert child is not None and child.tasks == [] and spec.team is not None
    first = plan_once(store, "old-sub", planner_on(server), child, spec.team, workdir)
    assert len(first.tasks) == 3 and len(server.requests) == 1
    assert store.tasks(CHILD) == []  # planned, never loaded

    executor = Recording()
    assert run_tree(store, workdir, plan, planner_on(server), executor) == "settled"
    assert store.get_task(PARENT, "pricing").state == "done"
    assert len(server.requests) == 1  # adopted: no second planning
    assert sum(executor.calls.values()) == 3
    assert [e.kind for e in store.events(CHILD, limit=5000)].count(PLANNED) == 1
    # the earlier planning is still counted, once
    assert attempt_spend(store)["calls"] == 1


def test_without_a_model_the_composite_attempt_fails_with_one_clear_line(
    store: Store, workdir: Path
) -> None:
    assert run_tree(store, workdir, goal_only_plan(), None, Recording()) == "settled"
    pricing = store.get_task(PARENT, "pricing")
    assert pricing.state == "blocked"  # out of attempts: in the inbox, with the reason
    [line] = (pricing.result or {})["notes"]["uncertain"]
    assert line.startswith(f"nested team {CHILD} has no tasks and sub-leader sub-")
    assert line.endswith("has no model to plan it: start it with --model or set TENURE_MODEL")
    assert line in (pricing.reason or "")
    assert store.tasks(CHILD) == []


def test_a_plan_the_model_keeps_getting_wrong_fails_the_attempt_with_the_reason(
    wire: ServerFactory, store: Store, workdir: Path
) -> None:
    server = wire([answer(INVENTED)])
    executor = Recording()
    assert run_tree(store, workdir, goal_only_plan(), planner_on(server), executor) == "settled"
    pricing = store.get_task(PARENT, "pricing")
    assert pricing.state == "blocked"  # out of attempts: in the inbox, with the reason
    [reason] = (pricing.result or {})["notes"]["uncertain"]
    assert "the planner gave no valid plan in 3 tries" in reason
    assert "the planner gave no valid plan" in (pricing.reason or "")
    assert "other/zeta.txt" in reason
    assert len(server.requests) == 3
    assert store.tasks(CHILD) == [] and executor.calls == Counter()
    rejected = [e for e in store.events(CHILD, limit=5000) if e.kind == "planner.rejected"]
    assert len(rejected) == 3
    # the failed planning's calls are counted in the parent's budget all the same
    assert attempt_spend(store)["calls"] == 3


def test_the_tree_of_a_goal_only_plan_names_the_child_team_with_no_tasks_yet() -> None:
    assert [(p.team, len(p.tasks)) for p in team_tree(goal_only_plan())] == [
        (PARENT, 1),
        (CHILD, 0),
    ]


GOAL_ONLY_YAML = """\
team: acme
tasks:
  - id: pricing
    goal: Price every vendor.
    deadline_seconds: 60
    team:
      goal: Price the vendors in vendors/.
      artifacts: [vendors/]
"""


def test_tenure_run_passes_its_model_to_the_sub_leaders_that_plan(
    wire: ServerFactory, workdir: Path
) -> None:
    server = wire([answer(GOOD)])
    (workdir / "plan.yaml").write_text(GOAL_ONLY_YAML)
    url = f"sqlite:///{workdir / 'run.db'}"
    proc = tenure(
        workdir,
        *("run", "plan.yaml", "--store", url, "--workers", "1"),
        *("--model", f"openai:planner@{server.openai_url}"),
        **{guard.ENV_ALLOW: server.base},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "acme: 1 done" in proc.stdout
    with open_store(url) as opened:
        assert {t.task_id: t.state for t in opened.tasks(CHILD)} == {
            "price-acme": "done",
            "price-bluefin": "done",
            "merge": "done",
        }
    assert len(server.requests) == 1


def test_tenure_run_refuses_a_goal_only_team_without_a_model(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "plan.yaml").write_text(GOAL_ONLY_YAML)
    url = f"sqlite:///{workdir / 'run.db'}"
    line = one_error_line(
        tenure_here(workdir, monkeypatch, capsys, "run", "plan.yaml", "--store", url)
    )
    assert f"nested team {CHILD} has a goal and no tasks" in line
    assert "give --model or set TENURE_MODEL" in line
    assert not (workdir / "run.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "openai:m"], "--model goes with --sub-leader"),
        (["--sub-leader", "--model", "nope:m"], "unknown model provider 'nope'"),
        (["--sub-leader", "--model", "openai:m"], "OPENAI_API_KEY is not set"),
    ],
)
def test_a_worker_with_an_unusable_planner_model_says_so_in_one_line(
    workdir: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"sqlite:///{workdir / 's.db'}"
    line = one_error_line(
        tenure_here(workdir, monkeypatch, capsys, "worker", "--store", url, *args)
    )
    assert message in line


def test_sub_leaders_get_the_model_and_a_goal_only_teams_workers_no_capability() -> None:
    parent, child = team_tree(goal_only_plan())
    args = team_worker_args(parent, "noop", Path(".tenure"), None, model="m:x")
    assert "--sub-leader" in args and args[args.index("--model") + 1] == "m:x"
    assert "--store" not in args  # a worker gets the store URL in TENURE_STORE
    args = team_worker_args(child, "noop", Path(".tenure"), None, model="m:x")
    assert "--capability" not in args and "--model" not in args


def test_a_stand_in_adopts_the_plan_of_the_sub_leader_it_replaces(
    wire: ServerFactory, store: Store, workdir: Path
) -> None:
    """The assignee plans the child team, claims its lease and dies before loading the
    plan; an idle sub-leader stands in, loads that plan and never asks the model."""
    server = wire([answer(GOOD)])
    plan = goal_only_plan()
    spec = spec_for(plan, plan.tasks[0])
    executor = Recording()

    def config(team: str, member: str) -> FollowerConfig:
        return FollowerConfig(
            team=team, member_id=member, state_dir=workdir, poll_interval=0.01, member_ttl=2.0
        )

    members = [
        sub_leader(store, config(PARENT, "sub-2"), executor, planner=planner_on(server)),
        Follower(store, config(CHILD, "w1"), executor),
    ]
    stop, leader_stop = threading.Event(), threading.Event()
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True) for m in members]
    store.join(PARENT, "ghost", ttl=1.0, priority=10, capabilities=("work", "subteam"))
    leader = Leader(
        store,
        LeaderConfig(
            team=PARENT,
            member_id="top",
            elect=False,
            state_dir=workdir,
            poll_interval=0.01,
            stale_grace=3.0,
        ),
        plan,
    )
    outcome: list[str] = []
    runner = threading.Thread(target=lambda: outcome.append(leader.lead(leader_stop)), daemon=True)
    for thread in [*threads, runner]:
        thread.start()
    try:
        ghost_takes_attempt(store, PARENT, "pricing", alive=runner)
        child = child_plan(PARENT, spec)
        assert child is not None and spec.team is not None
        plan_once(store, "ghost", planner_on(server), child, spec.team, workdir)
        store.claim_lease(CHILD, "ghost", ttl=1.0, token=LEASE_TOKEN)
        # ... and the ghost dies before loading the plan: no heartbeats, no renewals
        runner.join(timeout=60)
        assert outcome == ["settled"]
    finally:
        leader_stop.set()
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    pricing = store.get_task(PARENT, "pricing")
    assert (pricing.state, pricing.attempt, pricing.assignee) == ("done", 1, "sub-2")
    assert len(server.requests) == 1  # planned by the ghost only
    assert sum(executor.calls.values()) == 3
    assert attempt_spend(store)["calls"] == 1  # the ghost's planning, reported by the stand-in
    kinds = [e.kind for e in store.events(PARENT, limit=5000)]
    assert "subteam.standing_in" in kinds and "task.retry" not in kinds
