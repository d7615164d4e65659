"""Plan files: plan.yaml, plan.json and the ```yaml block of plan.md load; bad plans are
refused with one ProtocolError naming the field or line, before anything runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tenure.protocol import ProtocolError, load_plan

PLAN_YAML = textwrap.dedent(
    """\
    team: acme/research
    goal: price the catalogue
    max_attempts: 2
    tasks:
      - id: fetch
        goal: fetch the vendor list
        acceptance_criteria: ["every row has a source"]
        checks:
          - kind: evidence
            max_age_seconds: 3600
        deadline_seconds: 30
      - id: price
        goal: price each item
        depends_on: [fetch]
        capability: pricing
        output_schema: {type: object, required: [total]}
        max_attempts: 5
        executor: noop
    """
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def refused(path: Path) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        load_plan(path)
    assert info.value.source == str(path)
    return info.value


def test_plan_yaml_loads(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, "plan.yaml", PLAN_YAML))
    assert plan.team == "acme/research"
    assert [t.id for t in plan.tasks] == ["fetch", "price"]
    fetch, price = plan.tasks
    assert fetch.acceptance_criteria == ["every row has a source"]
    assert fetch.checks[0].kind == "evidence"
    assert fetch.deadline_seconds == 30
    assert price.depends_on == ["fetch"]
    assert price.capability == "pricing"
    assert price.output_schema == {"type": "object", "required": ["total"]}
    assert plan.attempts_for(fetch) == 2
    assert plan.attempts_for(price) == 5


def test_plan_md_loads_its_yaml_block(tmp_path: Path) -> None:
    body = textwrap.indent(PLAN_YAML, "")
    markdown = (
        f"# Pricing run\n\nSome prose the leader keeps.\n\n```yaml\n{body}```\n\nMore prose.\n"
    )
    plan = load_plan(write(tmp_path, "plan.md", markdown))
    assert plan.team == "acme/research"
    assert [t.id for t in plan.tasks] == ["fetch", "price"]


def test_plan_json_loads(tmp_path: Path) -> None:
    data = {"team": "demo", "tasks": [{"id": "a", "goal": "do a"}]}
    plan = load_plan(write(tmp_path, "plan.json", json.dumps(data)))
    assert plan.team == "demo"
    assert plan.tasks[0].goal == "do a"


def test_plan_md_without_a_yaml_block_is_refused(tmp_path: Path) -> None:
    error = refused(write(tmp_path, "plan.md", "# Plan\n\nno block here\n"))
    assert "```yaml" in str(error)


def test_plan_md_with_an_unclosed_block_names_the_line(tmp_path: Path) -> None:
    error = refused(write(tmp_path, "plan.md", "# Plan\n\n```yaml\nteam: x\n"))
    assert error.field == "line 3"


def test_cycle_is_refused(tmp_path: Path) -> None:
    error = refused(
        write(
            tmp_path,
            "plan.yaml",
            """\
            tasks:
              - {id: a, goal: A, depends_on: [c]}
              - {id: b, goal: B, depends_on: [a]}
              - {id: c, goal: C, depends_on: [b]}
            """,
        )
    )
    assert error.field.startswith("tasks[") and error.field.endswith("].depends_on")
    assert "cycle" in error.expected


def test_self_dependency_is_refused(tmp_path: Path) -> None:
    error = refused(write(tmp_path, "plan.yaml", "tasks:\n  - {id: a, goal: A, depends_on: [a]}\n"))
    assert error.field == "tasks[0].depends_on"
    assert "itself" in error.expected


def test_missing_dependency_is_refused(tmp_path: Path) -> None:
    error = refused(
        write(
            tmp_path,
            "plan.yaml",
            """\
            tasks:
              - {id: a, goal: A}
              - {id: b, goal: B, depends_on: [a, ghost]}
            """,
        )
    )
    assert error.field == "tasks[1].depends_on"
    assert "'ghost'" in error.expected


def test_duplicate_id_is_refused(tmp_path: Path) -> None:
    error = refused(
        write(
            tmp_path,
            "plan.yaml",
            """\
            tasks:
              - {id: a, goal: A}
              - {id: b, goal: B}
              - {id: a, goal: again}
            """,
        )
    )
    assert error.field == "tasks[2].id"
    assert "tasks[0]" in error.expected


@pytest.mark.parametrize("bad_id", ["../etc/passwd", "a b", "-rf", "", "x/y"])
def test_unsafe_id_is_refused(tmp_path: Path, bad_id: str) -> None:
    text = f"tasks:\n  - id: {json.dumps(bad_id)}\n    goal: A\n"
    error = refused(write(tmp_path, "plan.yaml", text))
    assert error.field == "tasks[0].id"


def test_unsafe_team_is_refused(tmp_path: Path) -> None:
    error = refused(write(tmp_path, "plan.yaml", "team: ../up\ntasks:\n  - {id: a, goal: A}\n"))
    assert error.field == "team"


BROKEN_YAML = (
    'team: demo\ntasks:\n  - id: a\n    goal: "quoted" then more\n  - id: b\n    goal: B\n'
)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    error = refused(write(tmp_path, "plan.yaml", BROKEN_YAML))
    assert error.field == "line 4"
    assert "valid YAML" in error.expected
    bad_indent = "team: demo\ntasks:\n  - id: a\n    goal: A\n   oops: x\n  - id: b\n"
    assert refused(write(tmp_path, "plan.yaml", bad_indent)).field == "line 5"


def test_yaml_syntax_error_in_plan_md_names_the_line_of_the_md_file(tmp_path: Path) -> None:
    markdown = f"# Plan\n\nprose\n\n```yaml\n{BROKEN_YAML}```\n"
    error = refused(write(tmp_path, "plan.md", markdown))
    assert error.field == "line 9"  # line 4 of the block, which opens on line 5
    assert markdown.splitlines()[8].startswith('    goal: "quoted"')


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("tasks: []\n", "tasks"),
        ("team: demo\n", "tasks"),
        ("- just\n- a list\n", "(plan)"),
        ("tasks:\n  - {id: a}\n", "tasks[0].goal"),
        ("tasks:\n  - {id: a, goal: A, deadline_seconds: -1}\n", "tasks[0].deadline_seconds"),
        ("tasks:\n  - {id: a, goal: A, colour: red}\n", "tasks[0].colour"),
        ("tasks:\n  - {id: a, goal: A, checks: [{kind: vibes}]}\n", "tasks[0].checks[0].kind"),
    ],
)
def test_malformed_plans_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    error = refused(write(tmp_path, "plan.yaml", text))
    assert error.field == field


def test_missing_plan_file_is_a_protocol_error(tmp_path: Path) -> None:
    error = refused(tmp_path / "nope.yaml")
    assert error.field == "(file)"


GOAL_ONLY = "team: acme\ntasks:\n  - {id: a, goal: x}\n  - {id: b, goal: y, team: SECTION}\n"


def test_a_goal_only_team_section_loads_for_its_sub_leader_to_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(GOAL_ONLY.replace("SECTION", "{goal: Price them., artifacts: [vendors/]}"))
    section = load_plan(path).tasks[1].team
    assert section is not None and section.tasks == [] and section.artifacts == ["vendors/"]


@pytest.mark.parametrize(
    ("section", "field", "says"),
    [
        ("{}", "tasks[1].team.tasks", "or a goal (and artifacts) for its planner"),
        ("{max_attempts: 2}", "tasks[1].team.tasks", "or a goal"),
        ("{goal: Price them.}", "tasks[1].team.artifacts", "its planner uses only these"),
        (
            "{goal: g, artifacts: [a.txt], tasks: [{id: q, goal: x}]}",
            "tasks[1].team.artifacts",
            "only in a section with a goal and no tasks",
        ),
        (
            "{tasks: [{id: q, goal: x, team: {goal: g}}]}",
            "tasks[1].team.tasks[0].team.artifacts",
            "at least one path or URL",
        ),
    ],
)
def test_goal_only_team_sections_are_checked_naming_the_path(
    tmp_path: Path, section: str, field: str, says: str
) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(GOAL_ONLY.replace("SECTION", section))
    with pytest.raises(ProtocolError) as caught:
        load_plan(path)
    assert caught.value.field == field
    assert says in str(caught.value)
