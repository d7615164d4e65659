"""Credentials: owner-only keys outside the store, signatures that verify only as their
signer's, rotation, and the CLI that makes them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tenure.coord import LEAD, Credentials, SignatureRefused
from tenure.coord.credentials import ANYONE, add_member, init_team, rotate_lead
from tenure.protocol import ConfigError, Plan, TaskEnvelope, idempotency_key
from tenure.protocol.taskspec import TaskSpec
from tenure.roles.register import Register
from tenure.store import open_store

TEAM = "acme/research"


def envelope(task_id: str = "t") -> TaskEnvelope:
    return TaskEnvelope(
        task_id=task_id,
        idempotency_key=idempotency_key(task_id, 1),
        epoch=1,
        attempt=1,
        assigned_to="w1",
        deadline_seconds=30,
        goal="g",
    )


def test_keys_are_owner_only_and_a_readable_private_key_is_refused(tmp_path: Path) -> None:
    made = init_team(tmp_path, TEAM, ["w1"])
    for path in made:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if path.suffix == ".key" else 0o644), (path, oct(mode))
    folder = tmp_path / "acme" / "research"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    os.chmod(folder / "_lead.key", 0o644)
    with pytest.raises(ConfigError, match="can be read by others.*chmod 600"):
        Credentials.load(tmp_path, TEAM, "l1", "lead")


def test_a_signature_verifies_only_as_its_signer_in_its_team_and_kind(tmp_path: Path) -> None:
    init_team(tmp_path, TEAM, ["w1", "w2"])
    init_team(tmp_path, "other", ["w1"])
    lead = Credentials.load(tmp_path, TEAM, "l1", "lead")
    w1 = Credentials.load(tmp_path, TEAM, "w1", "work")
    body = envelope()
    signed = body.model_copy(update={"signature": lead.sign("envelope", body)})
    assert w1.verify("envelope", signed, signed.signature, by=LEAD) == LEAD
    changed = signed.model_copy(update={"goal": "something else"})
    with pytest.raises(SignatureRefused, match="does not match"):
        w1.verify("envelope", changed, changed.signature, by=LEAD)
    with pytest.raises(SignatureRefused, match="does not match"):  # another kind of body
        w1.verify("result", signed, signed.signature, by=LEAD)
    elsewhere = Credentials.load(tmp_path, "other", "w1", "work")
    with pytest.raises(SignatureRefused):  # another team's lead key
        elsewhere.verify("envelope", signed, signed.signature, by=LEAD)
    by_w2 = body.model_copy(
        update={"signature": Credentials.load(tmp_path, TEAM, "w2", "work").sign("envelope", body)}
    )
    with pytest.raises(SignatureRefused, match="signed by 'w2'; it must be by lead"):
        w1.verify("envelope", by_w2, by_w2.signature, by=LEAD)
    assert lead.verify("envelope", by_w2, by_w2.signature, by=ANYONE) == "w2"
    with pytest.raises(SignatureRefused, match="not signed"):
        w1.verify("envelope", body, None, by=LEAD)


def test_a_rotated_key_refuses_what_the_old_one_signed(tmp_path: Path) -> None:
    init_team(tmp_path, TEAM, ["w1"])
    old = Credentials.load(tmp_path, TEAM, "l1", "lead")
    body = envelope()
    signed = body.model_copy(update={"signature": old.sign("envelope", body)})
    rotate_lead(tmp_path, TEAM)
    fresh = Credentials.load(tmp_path, TEAM, "w1", "work")
    with pytest.raises(SignatureRefused):
        fresh.verify("envelope", signed, signed.signature, by=LEAD)
    add_member(tmp_path, TEAM, "w1")  # a member's key rotated: its old results stop counting
    assert Credentials.load(tmp_path, TEAM, "w1", "work").signer == "w1"


def test_rotation_keeps_the_previous_key_to_sign_again_with_unless_revoked(
    tmp_path: Path,
) -> None:
    init_team(tmp_path, TEAM, ["w1"])
    body = envelope()
    signed = body.model_copy(
        update={"signature": Credentials.load(tmp_path, TEAM, "l1", "lead").sign("envelope", body)}
    )
    rotate_lead(tmp_path, TEAM)
    new = Credentials.load(tmp_path, TEAM, "l1", "lead")
    assert new.by_previous_lead("envelope", signed, signed.signature)
    with pytest.raises(SignatureRefused):  # accepted for nothing else
        new.verify("envelope", signed, signed.signature, by=LEAD)
    rotate_lead(tmp_path, TEAM, keep_previous=False)  # the key was stolen: --revoke
    assert not (tmp_path / "acme" / "research" / "_lead.prev.pub").exists()
    assert not Credentials.load(tmp_path, TEAM, "l1", "lead").by_previous_lead(
        "envelope", signed, signed.signature
    )


def test_a_running_member_reads_the_lead_key_a_rotation_put_in_place(tmp_path: Path) -> None:
    init_team(tmp_path, TEAM, ["w1"])
    w1 = Credentials.load(tmp_path, TEAM, "w1", "work")
    body = envelope()
    first = Credentials.load(tmp_path, TEAM, "l1", "lead").sign("envelope", body)
    assert w1.verify("envelope", body, first, by=LEAD) == LEAD
    rotate_lead(tmp_path, TEAM)
    later = Credentials.load(tmp_path, TEAM, "l1", "lead").sign("envelope", body)
    assert w1.verify("envelope", body, later, by=LEAD) == LEAD  # no restart needed
    with pytest.raises(SignatureRefused):
        w1.verify("envelope", body, first, by=LEAD)


def test_a_signer_that_is_no_member_id_is_refused_as_a_signature(tmp_path: Path) -> None:
    init_team(tmp_path, TEAM, ["w1"])
    w1 = Credentials.load(tmp_path, TEAM, "w1", "work")
    body = envelope()
    forged = w1.sign("envelope", body).model_copy(update={"by": "../../etc/x"})
    with pytest.raises(SignatureRefused, match="which is no member id") as refused:
        w1.verify("envelope", body, forged, by=ANYONE)
    assert refused.value.claimed == "../../etc/x"


def test_every_folder_from_the_state_dir_down_is_owner_only(tmp_path: Path) -> None:
    state = tmp_path / ".tenure"
    root = state / "keys"
    init_team(root, "a/b", ["w1"])
    folders = [state, root, root / "a", root / "a" / "b", root / "a" / "b" / "_members"]
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in folders} == {
        f.name: oct(0o700) for f in folders
    }
    for folder in folders:  # an install from before: made 0755
        os.chmod(folder, 0o755)
    Credentials.load(root, "a/b", "w1", "work")  # tightened when a member loads its key
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o700 for f in folders)
    for folder in folders:
        os.chmod(folder, 0o755)
    init_team(root, "a/b")  # and when keys are made
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o700 for f in folders[:4])


def test_a_missing_key_names_the_command_that_makes_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tenure keys add --team acme/research --member w9"):
        Credentials.load(tmp_path, TEAM, "w9", "work")


def test_a_register_with_credentials_signs_what_it_writes_and_checks_what_it_reads(
    tmp_path: Path,
) -> None:
    init_team(tmp_path, TEAM)
    lead = Credentials.load(tmp_path, TEAM, "l1", "lead")
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    register = Register(store, TEAM, lambda: 0, lead)
    mine = register.create("mine", TaskSpec(id="mine", goal="g"))
    assert mine.problem is None and mine.spec.signature is not None
    store.create_task(TEAM, "theirs", epoch=0, spec={"goal": "g"})
    theirs = register.get("theirs")
    assert theirs.problem is not None and "not signed by the team's leadership" in theirs.problem
    tampered = dict(store.get_task(TEAM, "mine").spec, goal="something else")
    store.transition(TEAM, "mine", epoch=0, expect=["queued"], to="queued", spec=tampered)
    assert "does not match" in str(register.get("mine").problem)
    store.close()


def test_tenure_keys_init_then_show(tmp_path: Path) -> None:
    import subprocess

    plan = tmp_path / "plan.yaml"
    Plan.model_validate({"team": "acme", "tasks": [{"id": "t", "goal": "g"}]})
    plan.write_text("team: acme\ntasks:\n  - {id: t, goal: g}\n")
    keys = tmp_path / "keys"

    def tenure(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tenure", *args, "--keys", str(keys)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    made = tenure("keys", "init", "--plan", str(plan), "--member", "w1")
    assert made.returncode == 0, made.stderr
    shown = tenure("keys", "show", "--team", "acme")
    assert shown.returncode == 0 and "w1" in shown.stdout and "sha256:" in shown.stdout
    assert "PRIVATE" not in shown.stdout
    refused = tenure("keys", "show", "--team", "../escape")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr  # a bad flag
