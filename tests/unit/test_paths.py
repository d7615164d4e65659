"""Paths from plans, models and workers stay inside their working directory: one check
(``executors.paths.inside``), used by the leader, the planner's artifacts and workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure.executors.paths import PathOutside, inside
from tenure.protocol import ConfigError, Plan, ProtocolError
from tenure.roles import Leader, LeaderConfig
from tenure.roles.planning import artifacts_from
from tenure.store import open_store


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("A")
    (tmp_path / "secret.txt").write_text("not for the team")
    (root / "docs" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (root / "out").symlink_to(tmp_path)  # a directory leading out
    (root / "inner").symlink_to(root / "docs")  # a symlink that stays inside
    return root


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc", "'/etc' is absolute"),
        ("~/.ssh/id_rsa", "starts at a home directory"),
        ("../../outside.json", "goes up with '..'"),
        ("docs/../../x", "goes up with '..'"),
        ("docs/leak.txt", "leads outside it through a symlink"),
        ("out/new.json", "leads outside it through a symlink"),
        ("", "is not a path"),
    ],
)
def test_a_path_leading_out_is_refused_with_the_field_and_the_path(
    workdir: Path, path: str, why: str
) -> None:
    with pytest.raises(PathOutside) as caught:
        inside(path, workdir, field="tasks[0].scope[1]")
    line = str(caught.value)
    assert line.startswith("tasks[0].scope[1]: a path inside the working directory; ")
    assert why in line and "\n" not in line
    assert isinstance(caught.value, ProtocolError) and caught.value.path == path


@pytest.mark.parametrize("path", ["docs/a.txt", "docs/", "new/file.json", "inner/a.txt", "out*"])
def test_a_path_inside_is_resolved_there(workdir: Path, path: str) -> None:
    assert inside(path, workdir, field="f").is_relative_to(workdir.resolve())


def test_an_artifact_outside_the_workdir_is_refused_and_a_listing_leaves_links_out(
    workdir: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"artifact: .*'/etc/hostname' is absolute"):
        artifacts_from(["/etc/hostname"], workdir)
    with pytest.raises(ConfigError, match=r"'docs/leak.txt' leads outside it"):
        artifacts_from(["docs/leak.txt"], workdir)
    found = {a.name: a for a in artifacts_from(["docs/"], workdir)}
    assert sorted(found) == ["docs/", "docs/a.txt"]  # leak.txt is not reachable
    assert "1 file(s) leading out of the working directory left out" in found["docs/"].description


@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"scope": ["/etc"]}, "tasks[0].scope[0]"),
        ({"scope": ["ok/", "../x"]}, "tasks[0].scope[1]"),
        ({"input": {"output_file": "out/x.json"}, "scope": ["out/"]}, "tasks[0].scope[0]"),
        ({"input": {"output_file": "/x.json"}, "scope": ["*"]}, "tasks[0].input.output_file"),
    ],
)
def test_a_leader_refuses_an_operator_plan_writing_outside_its_workdir(
    workdir: Path, task: dict[str, object], field: str
) -> None:
    plan = Plan.model_validate({"team": "p", "tasks": [{"id": "a", "goal": "g", **task}]})
    with open_store("memory://") as store, pytest.raises(ProtocolError) as caught:
        Leader(store, LeaderConfig(team="p", member_id="l", workdir=workdir), plan)
    assert str(caught.value).startswith(f"{field}: a path inside the working directory")
