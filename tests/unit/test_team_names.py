"""Team paths: one validator (``protocol.ids.check_team``) for plans, the command line
and the members. A name is accepted or refused with one ``ProtocolError`` line; an
accepted one names files only inside the state directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.coord.epochs import EpochMemory
from tenure.executors import resolve_executor
from tenure.protocol import ProtocolError, load_plan
from tenure.protocol.ids import MAX_TEAM_DEPTH, check_team
from tenure.roles import Follower, FollowerConfig, Leader, LeaderConfig
from tenure.store import open_store

NAMES = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(["a", "Z9", "..", ".", "", "/", "-x", "x.y", "a_b", "\x00", " ", "é", "~"]),
        max_size=12,
    ).map("".join),
)


@settings(max_examples=500, deadline=None)
@given(NAMES)
def test_any_team_name_is_valid_or_one_line_and_its_files_stay_inside(name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        state = Path(folder) / "state"
        try:
            check_team(name)
        except ProtocolError as exc:
            assert str(exc).startswith("team: ") and "\n" not in str(exc)
            with pytest.raises(ProtocolError):
                EpochMemory.for_member(state, name, "w1")
            assert not state.exists()
            return
        memory = EpochMemory.for_member(state, name, "w1")
        memory.observe(3)
        assert memory.path is not None
        assert memory.path.resolve().is_relative_to((state / "members").resolve())
        written = [p for p in Path(folder).rglob("*") if p.is_file()]
        assert written == [memory.path]


@pytest.mark.parametrize(
    "name", ["alpha", "acme/research", "parent/child", "code/run-20260101-120000", "a.b_c-d/E9"]
)
def test_team_paths_in_use_keep_working(name: str, tmp_path: Path) -> None:
    assert check_team(name) == name
    memory = EpochMemory.for_member(tmp_path, name, "w1")
    assert memory.path == tmp_path / "members" / Path(*name.split("/")) / "w1.epoch.json"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("../../../../escaped", "no '..'"),
        ("a/../b", "no '..'"),
        ("/etc/team", "a relative team path"),
        ("a//b", "no empty segment"),
        ("a/", "no empty segment"),
        ("", "a team path like acme"),
        (".hidden", "starting with a letter or digit"),
        ("a b", "letters, digits"),
        ("/".join(["t"] * (MAX_TEAM_DEPTH + 1)), f"at most {MAX_TEAM_DEPTH} levels"),
    ],
)
def test_a_bad_team_path_names_the_rule_it_breaks(name: str, says: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        check_team(name, "--team")
    assert str(caught.value).startswith("--team: ") and says in str(caught.value)


def test_members_refuse_a_team_path_that_leads_out(tmp_path: Path) -> None:
    with open_store("memory://") as store:
        with pytest.raises(ProtocolError, match="^team: "):
            Leader(store, LeaderConfig(team="../../escaped", member_id="l1", state_dir=tmp_path))
        with pytest.raises(ProtocolError, match="^team: "):
            config = FollowerConfig(team="/abs", member_id="w1", state_dir=tmp_path)
            Follower(store, config, resolve_executor("noop"))
    with pytest.raises(ProtocolError, match="^member_id: "):
        EpochMemory.for_member(tmp_path, "alpha", "../../w1")
    assert list(tmp_path.iterdir()) == []


def test_the_plan_loader_uses_the_same_check(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("team: ../out\ntasks:\n  - {id: t, goal: g}\n")
    with pytest.raises(ProtocolError, match=r"team: .*no '\.\.'"):
        load_plan(plan)
