"""Model output is data, not instructions: a plan, a split or a nested plan written by a
model may not add commands, executors or paths outside the working directory unless
the operator allows it; the planner is re-asked, nothing runs, and every refusal and
every use of an allowance is in the log.

The model is always the real openai SDK against the local wire-format server, through
the Python planner, the split feature, a sub-leader and the real ``tenure run``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenure.coord import LeaseTiming
from tenure.executors import TaskContext, coerce_result, failed
from tenure.executors.llm import LLMExecutor
from tenure.models import ScriptedModel, guard, open_model
from tenure.protocol import Plan, PlanTask, TaskEnvelope, TaskResult, idempotency_key
from tenure.roles.features.split import Splitter
from tenure.roles.planning import (
    PLANNER_SYSTEM,
    Artifact,
    Planner,
    PlanningFailed,
    artifacts_from,
    planner_system,
)
from tenure.roles.teams.local import LocalTeam
from tenure.store import Store, open_store

from .conftest import ServerFactory
from .test_cli_models import tenure
from .test_nested_planner import CHILD, PARENT, goal_only_plan, run_tree
from .wire_server import WireServer, answer

MARKER = "PWNED"


def price(vendor: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"price-{vendor}",
        "goal": f"Extract {vendor}'s monthly price.",
        "input": {"vendor": vendor, "page": f"vendors/{vendor}.txt"},
        **extra,
    }


GOOD = {"tasks": [price("acme"), price("bluefin")]}
COMMAND = {"tasks": [price("acme", checks=[{"kind": "command", "run": f"touch {MARKER}"}])]}
EXECUTOR = {"tasks": [price("acme", executor=f"command:touch {MARKER}")]}
OUTSIDE = {
    "tasks": [
        price(
            "acme",
            input={"page": "vendors/acme.txt", "output_file": "../../outside.json"},
            scope=["../../outside.json"],
        )
    ]
}
ETC = {"tasks": [price("acme", scope=["/etc"])]}
LINK = {"tasks": [price("acme", input={"page": "vendors/leak.txt"})]}
JUDGE = {
    "tasks": [price("acme", checks=[{"kind": "judge", "model": "openai:x@http://10.9.9.9/v1"}])]
}
NESTED = {
    "tasks": [price("acme", team={"goal": "More.", "artifacts": ["/etc/"]}, capability="subteam")]
}
FORGED = {"tasks": [price("acme", input={"page": "vendors/acme.txt", "operator_answers": ["ok"]})]}
OPTIONS = {"tasks": [price("acme", options={"office_hours": True})]}
CAPABILITY = {"tasks": [price("acme", capability="subteam")]}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """``tmp/a/b/work`` with two vendor pages and a page that is a symlink leading out:
    ``../../outside.json`` from it would still land inside ``tmp``."""
    root = tmp_path / "a" / "b" / "work"
    (root / "vendors").mkdir(parents=True)
    for vendor in ("acme", "bluefin"):
        (root / "vendors" / f"{vendor}.txt").write_text(f"{vendor}: $10/month\n")
    (tmp_path / "secret.txt").write_text("the operator's secret\n")
    (root / "vendors" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    return root


def nothing_ran(tmp_path: Path) -> None:
    """No marker anywhere the team could have run a command, nothing written outside."""
    assert not list(tmp_path.rglob(MARKER)), "a command from the model ran"
    assert not (Path.cwd() / MARKER).exists()
    assert not list(tmp_path.rglob("outside.json")), "the model's path was written"
    assert (tmp_path / "secret.txt").read_text() == "the operator's secret\n"


def planner_on(server: WireServer, **kwargs: Any) -> Planner:
    return Planner(open_model(f"openai:planner@{server.openai_url}"), **kwargs)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.seen.append((kind, data))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for seen, data in self.seen if seen == kind]


# --- the Python planner -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "refused", "says"),
    [
        (COMMAND, "commands", "checks[0] is a command check ('touch PWNED')"),
        (EXECUTOR, "executors", "names the executor 'command:touch PWNED'"),
        (OUTSIDE, "paths", "scope[0]: a path inside the working directory; '../../outside.json'"),
        (ETC, "paths", "scope[0]: a path inside the working directory; '/etc' is absolute"),
        (
            LINK,
            "paths",
            "input.page: a path inside the working directory; 'vendors/leak.txt' leads",
        ),
        (JUDGE, "executors", "names the judge model 'openai:x@http://10.9.9.9/v1'"),
        (NESTED, "team", "has a nested team"),
        (FORGED, "input", "writes input.operator_answers, which the leader fills in"),
        (OPTIONS, "options", "sets options (office_hours)"),
        (CAPABILITY, "capability", "capability 'subteam', which is reserved"),
    ],
)
def test_a_plan_that_adds_what_a_model_may_not_is_re_asked_with_the_reason(
    wire: ServerFactory,
    workdir: Path,
    bad: dict[str, Any],
    refused: str,
    says: str,
) -> None:
    server = wire([answer(bad), answer(GOOD)])
    events = Events()
    plan = planner_on(server, on_event=events).plan(
        "Price.", artifacts_from(["vendors/"], workdir), workdir=workdir
    )
    assert [t.id for t in plan.tasks] == ["price-acme", "price-bluefin"]
    [rejected] = events.of("planner.rejected")
    assert rejected["refused"] == refused and says in rejected["reason"]
    assert says in server.requests[1]["messages"][-1]["content"]  # the model is told why
    assert events.of("planner.allowed") == []
    nothing_ran(workdir.parents[2])


def test_a_model_that_keeps_at_it_fails_the_planning_with_one_line(
    wire: ServerFactory, workdir: Path
) -> None:
    server = wire([answer(COMMAND), answer(EXECUTOR), answer(OUTSIDE)])
    events = Events()
    planner = planner_on(server, on_event=events)
    with pytest.raises(PlanningFailed) as caught:
        planner.plan("Price.", artifacts_from(["vendors/"], workdir), workdir=workdir)
    line = str(caught.value)
    assert line.startswith("the planner gave no valid plan in 3 tries; last reason: ")
    assert "'../../outside.json'" in line and "\n" not in line
    assert [e["refused"] for e in events.of("planner.rejected")] == [
        "commands",
        "executors",
        "paths",
    ]
    nothing_ran(workdir.parents[2])


def test_the_operators_allowance_lets_a_command_check_through_and_logs_it(
    wire: ServerFactory, workdir: Path
) -> None:
    server = wire([answer(COMMAND)])
    events, said = Events(), []
    planner = planner_on(server, on_event=events, allow={"commands"}, announce=said.append)
    plan = planner.plan("Price.", artifacts_from(["vendors/"], workdir), workdir=workdir)
    assert plan.tasks[0].checks[0].kind == "command"
    assert events.of("planner.rejected") == []
    [used] = events.of("planner.allowed")
    assert used == {
        "purpose": "plan",
        "allow": "commands",
        "task_id": "price-acme",
        "field": "checks[0].run",
        "value": "touch PWNED",
    }
    [line] = said
    assert "allowed by the operator (commands)" in line and "touch PWNED" in line
    # commands only: an executor is still refused
    server = wire([answer(EXECUTOR), answer(GOOD)])
    events = Events()
    planner_on(server, on_event=events, allow={"commands"}).plan(
        "Price.", artifacts_from(["vendors/"], workdir), workdir=workdir
    )
    assert [e["refused"] for e in events.of("planner.rejected")] == ["executors"]


def test_the_system_prompt_offers_command_checks_only_when_allowed() -> None:
    assert '"kind": "command"' not in PLANNER_SYSTEM
    assert "it may not add command checks, executors, judge models" in PLANNER_SYSTEM
    allowed = planner_system({"commands", "executors"})
    assert '"kind": "command"' in allowed and '"executor"' in allowed
    assert "command checks" not in allowed.split("7.", 1)[1]


def test_an_unknown_allowance_is_one_line() -> None:
    from tenure.protocol import ConfigError

    with pytest.raises(ConfigError, match="cannot allow model output 'shell'"):
        Planner(ScriptedModel([GOOD]), allow={"shell"})


# --- tenure run --goal --------------------------------------------------------------------


def run_goal(server: WireServer, workdir: Path, *extra: str) -> Any:
    return tenure(
        workdir,
        *("run", "--goal", "Price every vendor.", "--artifact", "vendors/"),
        *("--model", f"openai:planner@{server.openai_url}", "--exec", "noop"),
        *("--mode", "local", "--workers", "1", "--team", "t"),
        *("--store", f"sqlite:///{workdir / 'state.db'}", "--state-dir", str(workdir / ".tenure")),
        *extra,
        **{guard.ENV_ALLOW: server.base},
    )


def team_events(workdir: Path, kind: str) -> list[dict[str, Any]]:
    with open_store(f"sqlite:///{workdir / 'state.db'}") as store:
        return [e.data for e in store.events("t", limit=5000) if e.kind == kind]


def test_tenure_run_refuses_a_malicious_plan_and_runs_nothing(
    wire: ServerFactory, workdir: Path
) -> None:
    server = wire([answer(COMMAND), answer(EXECUTOR), answer(OUTSIDE)])
    proc = run_goal(server, workdir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [line] = [each for each in proc.stderr.splitlines() if each.strip()]
    assert line.startswith("error: the planner gave no valid plan in 3 tries; last reason: ")
    assert "Traceback" not in proc.stderr
    assert len(server.requests) == 3
    rejected = team_events(workdir, "planner.rejected")
    assert [e["refused"] for e in rejected] == ["commands", "executors", "paths"]
    with open_store(f"sqlite:///{workdir / 'state.db'}") as store:
        assert store.tasks("t") == []  # nothing registered, nothing dispatched
    nothing_ran(workdir.parents[2])


def test_tenure_run_re_asks_after_paths_leading_out_then_runs_the_good_plan(
    wire: ServerFactory, workdir: Path
) -> None:
    server = wire([answer(ETC), answer(LINK), answer(GOOD)])
    proc = run_goal(server, workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "planned 2 tasks in 3 calls," in proc.stdout
    reasons = [e["reason"] for e in team_events(workdir, "planner.rejected")]
    assert "'/etc' is absolute" in reasons[0] and "'vendors/leak.txt' leads outside" in reasons[1]
    nothing_ran(workdir.parents[2])


def test_tenure_run_with_the_operators_allowance_runs_the_models_command_check(
    wire: ServerFactory, workdir: Path
) -> None:
    ran = {"tasks": [price("acme", checks=[{"kind": "command", "run": "touch RAN"}])]}
    server = wire([answer(ran)])
    proc = run_goal(server, workdir, "--allow-model", "commands")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (workdir / "RAN").exists()  # the leader ran it, in the working directory
    assert "warning: --allow-model commands" in proc.stderr
    assert "allowed by the operator (commands): task 'price-acme'" in proc.stderr
    [used] = team_events(workdir, "planner.allowed")
    assert (used["allow"], used["value"]) == ("commands", "touch RAN")
    assert '"kind": "command"' in server.requests[0]["messages"][0]["content"]  # offered


# --- a split ------------------------------------------------------------------------------


PARENT_TASK = {
    "id": "report",
    "goal": "Summarise both pages.",
    "input": {"pages": ["vendors/acme.txt", "vendors/bluefin.txt"]},
    "scope": ["out/"],
    "max_attempts": 1,
}


def part(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": name,
        "goal": f"Summarise {name}.",
        "input": {"page": f"vendors/{name}.txt"},
        **extra,
    }


class Worker:
    """Fails the whole task, does its parts."""

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        if envelope.task_id == "report":
            return failed(envelope, "too much at once")
        return coerce_result(envelope, {"summary": envelope.task_id})


def run_split(store: Store, workdir: Path, splitter: Splitter) -> None:
    team = LocalTeam(
        store,
        Plan.model_validate({"team": "t", "tasks": [PARENT_TASK]}),
        Worker(),
        workers=1,
        timing=LeaseTiming(ttl=5.0),
        state_dir=workdir / ".tenure",
        workdir=workdir,
        splitter=splitter,
    )
    assert team.run(timeout=20) == "settled"


@pytest.fixture
def store(workdir: Path) -> Any:
    opened = open_store(f"sqlite:///{workdir / 'state.db'}")
    yield opened
    opened.close()


def log_of(store: Store, team: str, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in store.events(team, limit=5000) if e.kind == kind]


def test_a_split_that_adds_commands_or_executors_is_refused_and_the_task_goes_to_a_person(
    wire: ServerFactory, workdir: Path, store: Store
) -> None:
    command = {
        "tasks": [
            part("acme", checks=[{"kind": "command", "run": f"touch {MARKER}"}]),
            part("bluefin"),
        ]
    }
    executor = {"tasks": [part("acme", executor=f"command:touch {MARKER}"), part("bluefin")]}
    outside = {"tasks": [part("acme", scope=["out/../../../x"]), part("bluefin")]}
    server = wire([answer(command), answer(executor), answer(outside)])
    run_split(store, workdir, Splitter(planner_on(server), workdir=workdir))
    record = store.get_task("t", "report")
    assert record.state == "blocked"
    assert "could not split: the planner gave no valid plan in 3 tries" in record.reason
    assert [t.task_id for t in store.tasks("t")] == ["report"]  # no part registered
    refused = [e["refused"] for e in log_of(store, "t", "planner.rejected")]
    assert refused == ["commands", "executors", "paths"]
    assert log_of(store, "t", "task.split_failed")
    nothing_ran(workdir.parents[2])


def test_a_split_with_the_operators_allowance_runs_the_parts_command_check(
    wire: ServerFactory, workdir: Path, store: Store
) -> None:
    parts = {
        "tasks": [part("acme", checks=[{"kind": "command", "run": "touch RAN"}]), part("bluefin")]
    }
    server = wire([answer(parts)])
    said: list[str] = []
    planner = planner_on(server, allow={"commands"}, announce=said.append)
    run_split(store, workdir, Splitter(planner, workdir=workdir))
    assert store.get_task("t", "report").state == "done"
    assert (workdir / "RAN").exists()
    [used] = log_of(store, "t", "planner.allowed")
    assert (used["purpose"], used["task_id"], used["value"]) == (
        "split:report",
        "report.acme",
        "touch RAN",
    )
    assert len(said) == 1


def test_a_part_may_keep_its_parents_executor_and_checks() -> None:
    parent = PlanTask.model_validate(
        {
            **PARENT_TASK,
            "executor": "command:./summarise.sh",
            "checks": [{"kind": "command", "run": "test -s out/summary.json"}],
        }
    )
    kept = {"tasks": [part("acme", checks=[dict(parent.checks[0].model_dump())]), part("bluefin")]}
    planner = Planner(ScriptedModel([kept]))
    parts, _ = planner.split(parent, ["too much"], [Artifact("vendors/", "dir")], taken=set())
    assert [p.executor for p in parts] == ["command:./summarise.sh"] * 2
    assert parts[0].checks == parent.checks


# --- a sub-leader's goal-only nested plan -------------------------------------------------


def test_a_sub_leaders_nested_plan_with_a_command_is_refused_and_nothing_runs(
    wire: ServerFactory, workdir: Path, store: Store
) -> None:
    from .test_nested_planner import Recording

    server = wire([answer(COMMAND), answer(EXECUTOR), answer(LINK)])
    executor = Recording()
    assert run_tree(store, workdir, goal_only_plan(), planner_on(server), executor) == "settled"
    pricing = store.get_task(PARENT, "pricing")
    assert pricing.state == "blocked"
    assert "the planner gave no valid plan in 3 tries" in (pricing.reason or "")
    assert store.tasks(CHILD) == [] and sum(executor.calls.values()) == 0
    refused = [e["refused"] for e in log_of(store, CHILD, "planner.rejected")]
    assert refused == ["commands", "executors", "paths"]
    nothing_ran(workdir.parents[2])


def test_a_sub_leader_with_the_operators_allowance_runs_the_nested_plans_command(
    wire: ServerFactory, workdir: Path, store: Store
) -> None:
    from .test_nested_planner import Recording

    ran = {"tasks": [price("acme", checks=[{"kind": "command", "run": "touch RAN"}])]}
    server = wire([answer(ran)])
    said: list[str] = []
    planner = planner_on(server, allow={"commands"}, announce=said.append)
    assert run_tree(store, workdir, goal_only_plan(), planner, Recording()) == "settled"
    assert store.get_task(PARENT, "pricing").state == "done"
    assert (workdir / "RAN").exists()  # run by the nested team's leader
    [used] = log_of(store, CHILD, "planner.allowed")
    assert (used["allow"], used["task_id"]) == ("commands", "price-acme")
    assert said and "touch RAN" in said[0]


# --- the LLM worker at run time ------------------------------------------------------------


def envelope(**fields: Any) -> TaskEnvelope:
    return TaskEnvelope.model_validate(
        {
            "task_id": "price-acme",
            "idempotency_key": idempotency_key("price-acme", 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "w1",
            "deadline_seconds": 30,
            "goal": "Extract the price.",
            **fields,
        }
    )


ABSOLUTE = "(an absolute path)"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"input": {"page": "vendors/leak.txt"}}, "input.page: "),
        ({"input": {"pages": ["vendors/acme.txt", "../../../secret.txt"]}}, "input.pages[1]: "),
        ({"input": {"output_file": "out/x.json"}, "scope": ["out/"]}, "input.output_file: "),
        ({"input": {"output_file": ABSOLUTE}, "scope": ["*"]}, "input.output_file: "),
    ],
)
def test_the_llm_worker_refuses_a_path_leading_out_before_calling_its_model(
    workdir: Path, fields: dict[str, Any], says: str
) -> None:
    (workdir / "out").symlink_to(workdir.parents[2])  # a directory leading out
    if fields["input"].get("output_file") == ABSOLUTE:  # outside, yet inside this test's tmp
        fields = {**fields, "input": {"output_file": str(workdir.parents[2] / "x.json")}}
    model = ScriptedModel([{"status": "completed", "artifact": {"x": 1}}])
    ctx = TaskContext(worker_id="w1", team="t", workdir=workdir)
    result = LLMExecutor(model).execute(envelope(**fields), ctx)
    assert result.status == "failed"
    [line] = result.notes.uncertain
    assert line.startswith(says) and "a path inside the working directory" in line
    assert model.calls == []  # nothing was sent to the model, the secret least of all
    assert not (workdir.parents[2] / "x.json").exists()
