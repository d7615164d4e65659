"""Secrets hygiene, piece by piece: what a known secret is, how it is taken out of text,
URLs and values, the environment a child gets, owner-only files, and safe console text."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tenure.console.processes import spawn
from tenure.console.safe import plain, safe_text
from tenure.coord import EpochMemory
from tenure.executors.agent_cli import PRESET_KEYS, AgentCLI
from tenure.executors.environment import (
    ENV_ALLOW,
    allow_names,
    check_pass_names,
    child_env,
)
from tenure.protocol import ConfigError
from tenure.protocol.private import private_dir, private_file
from tenure.protocol.secrets import (
    MASK,
    is_secret_name,
    known_secrets,
    redact_text,
    redact_url,
    redact_value,
    register_secret,
    url_passwords,
)
from tenure.store import open_store

KEY = "sk-unit-0123456789abcdef"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- what a known secret is ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("ANTHROPIC_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("ANTHROPIC_AUTH_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("CLIENT_SECRET", True),
        ("PGPASSWORD", True),
        ("DB_PASSWORD", True),
        ("TENURE_KEY", True),
        ("TENURE_KEY_LEADER", True),
        ("PATH", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("KEYBOARD", False),
        ("TENURE_MODEL", False),
    ],
)
def test_which_variable_names_hold_secrets(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_known_secrets_come_from_names_urls_the_operator_list_and_registrations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TENURE_KEY_W1", "member-key-material")
    monkeypatch.setenv("TENURE_STORE", "redis://:store-pass-1@10.0.0.5:6379/0")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:db-pass-22@db/app?sslmode=require")
    monkeypatch.setenv("MY_ODD_VAR", "operator-listed-value")
    monkeypatch.setenv("TENURE_REDACT_ENV", "MY_ODD_VAR")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be told from ordinary text
    register_secret("registered-secret-9")
    found = known_secrets()
    for value in (
        KEY,
        "member-key-material",
        "store-pass-1",
        "db-pass-22",
        "operator-listed-value",
        "registered-secret-9",
    ):
        assert value in found
    assert "abc" not in found
    assert "10.0.0.5" not in " ".join(found)


def test_url_passwords_are_found_as_written_and_decoded() -> None:
    assert url_passwords("redis://ops:pa%3Ass-word@host/0") == ["pa%3Ass-word", "pa:ss-word"]
    assert url_passwords("redis://host/0?password=query-pass") == ["query-pass"]
    assert url_passwords("redis://default@host/0") == []  # a user name is not a secret


# --- taking them out ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter22@host:6379/0", "redis://:***@host:6379/0"),
        ("rediss://ops:pw@host:6380/1?prefix=a", "rediss://ops:***@host:6380/1?prefix=a"),
        ("redis://host:6379/0?password=abc&prefix=x", "redis://host:6379/0?password=***&prefix=x"),
        ("https://ghp_tokenvalue@github.com/o/r", "https://***@github.com/o/r"),
        ("weird+scheme://u:p@h/x?token=t", "weird+scheme://u:***@h/x?token=***"),
        ("sqlite:///.tenure/state.db", "sqlite:///.tenure/state.db"),
        ("unix:///run/redis.sock?db=0", "unix:///run/redis.sock?db=0"),
    ],
)
def test_redact_url_hides_credentials_whatever_the_scheme(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_text_masks_every_known_secret_and_inline_url_passwords(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    text = f"export OPENAI_API_KEY={KEY}; psql postgres://u:inline-pw@db/x; ssh://git@host"
    shown = redact_text(text)
    assert KEY not in shown and "inline-pw" not in shown
    assert f"OPENAI_API_KEY={MASK}" in shown and "postgres://u:***@db/x" in shown
    assert "ssh://git@host" in shown


def test_redact_value_walks_keys_and_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    value = {"a": [KEY, 3, None, {KEY: f"x{KEY}y"}], "n": 1.5}
    assert redact_value(value) == {"a": [MASK, 3, None, {MASK: f"x{MASK}y"}], "n": 1.5}


def test_a_longer_secret_is_masked_whole_not_around_a_shorter_one() -> None:
    assert redact_text("abcdefgh-12345", ["abcdefgh", "abcdefgh-12345"]) == MASK


# --- the environment a child gets ----------------------------------------------------------


def test_a_child_gets_the_allowlist_and_what_the_caller_sets_never_the_store_or_keys() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/home/me",
        "LC_ALL": "C.UTF-8",
        "OPENAI_API_KEY": KEY,
        "TENURE_STORE": "redis://:pw@h/0",
        "TENURE_KEY_W1": "member-key",
        "TENURE_MODEL": "openai:x",
        "AWS_REGION": "eu-west-1",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "UNRELATED": "1",
    }
    env = child_env({"TENURE_TASK_ID": "t1", "TENURE_STORE": "x"}, environ=environ)
    assert env == {"PATH": "/bin", "HOME": "/home/me", "LC_ALL": "C.UTF-8", "TENURE_TASK_ID": "t1"}
    env = child_env(pass_names=["OPENAI_API_KEY"], environ=environ)
    assert env["OPENAI_API_KEY"] == KEY
    allowed = {**environ, ENV_ALLOW: "AWS_*,UNRELATED,TENURE_STORE,TENURE_KEY*"}
    env = child_env(environ=allowed)
    assert env["AWS_REGION"] == "eu-west-1" and env["AWS_SECRET_ACCESS_KEY"] == "aws-secret"
    assert env["UNRELATED"] == "1"
    assert "TENURE_STORE" not in env and "TENURE_KEY_W1" not in env
    assert "OPENAI_API_KEY" not in env and "TENURE_MODEL" not in env


def test_pass_env_refuses_the_store_url_and_members_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TENURE_STORE", "TENURE_KEY_W1", "TENURE_*", "TENURE_KEY*", "*", "A B"):
        with pytest.raises(ConfigError):
            check_pass_names([name])
    assert check_pass_names(["AWS_*,GITHUB_TOKEN", " X "]) == ["AWS_*", "GITHUB_TOKEN", "X"]
    monkeypatch.setenv(ENV_ALLOW, "A")
    allow_names(["B", "A"])
    assert os.environ[ENV_ALLOW] == "A,B"


def test_agent_presets_name_only_their_provider_key() -> None:
    assert AgentCLI.from_spec("claude").pass_env == ("ANTHROPIC_API_KEY",)
    assert AgentCLI.from_spec("codex").pass_env == ("OPENAI_API_KEY",)
    assert AgentCLI.from_spec("gemini").pass_env == ("GEMINI_API_KEY",)
    assert AgentCLI.from_spec("script:true").pass_env == ()
    assert set(PRESET_KEYS) == {"claude", "codex", "aider", "gemini", "opencode"}


def test_a_member_is_never_started_with_the_store_url_in_its_argv() -> None:
    for args in (["worker", "--store", "x"], ["worker", "--store=x"], ["worker", "-s", "x"]):
        with pytest.raises(ConfigError, match="TENURE_STORE"):
            spawn(args)


# --- owner-only files -----------------------------------------------------------------------


def test_the_sqlite_store_and_its_companions_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / ".tenure" / "deep" / "state.db"
    with open_store(f"sqlite:///{db}") as store:
        store.append_event("t", "x", {})
        for path in (db, db.with_name("state.db-wal"), db.with_name("state.db-shm")):
            assert mode(path) == 0o600, path
    assert mode(db.parent) == 0o700 and mode(tmp_path / ".tenure") == 0o700


def test_an_existing_install_is_tightened_when_opened(tmp_path: Path) -> None:
    state = tmp_path / ".tenure"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    db = state / "state.db"
    companions = (db, db.with_name("state.db-wal"), db.with_name("state.db-shm"))
    with open_store(f"sqlite:///{db}") as old:  # as an earlier version left them
        old.append_event("t", "x", {})
        for path in companions:
            path.chmod(0o644)
        state.chmod(0o755)
        with open_store(f"sqlite:///{db}") as store:
            store.events("t")
        assert mode(state) == 0o700
        for path in companions:
            assert mode(path) == 0o600, path


def test_an_operators_own_directory_is_left_as_it_is(tmp_path: Path) -> None:
    mine = tmp_path / "project"
    mine.mkdir()
    mine.chmod(0o755)
    with open_store(f"sqlite:///{mine / 'team.db'}"):
        pass
    assert mode(mine) == 0o755 and mode(mine / "team.db") == 0o600


def test_epoch_memory_is_owner_only(tmp_path: Path) -> None:
    memory = EpochMemory.for_member(tmp_path / ".tenure", "org/research", "w1")
    memory.observe(3)
    assert memory.path is not None
    assert mode(memory.path) == 0o600
    for folder in (memory.path.parent, tmp_path / ".tenure" / "members" / "org"):
        assert mode(folder) == 0o700, folder


def test_private_helpers_create_and_tighten(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == 0o700 and mode(made) == 0o700
    loose = tmp_path / "loose"
    loose.write_text("x")
    loose.chmod(0o664)
    private_file(loose)
    assert mode(loose) == 0o600 and loose.read_text() == "x"


# --- safe console text ---------------------------------------------------------------------

NASTY = (
    "ok\x1b[31mred\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ [bold red]loud[/] a\rb\x07\x9b\u202e"
)


def test_safe_text_shows_controls_and_escapes_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    shown = plain(NASTY + KEY)
    for char in ("\x1b", "\r", "\x07", "\x9b", "\u202e"):
        assert char not in shown
    assert "\\x1b[31m" in shown and "\\r" in shown and "\\x9b" in shown and "\\u202e" in shown
    assert KEY not in shown and shown.endswith(MASK)
    assert "\\[bold red]" in safe_text(NASTY)
    assert plain("two\nlines\tand a tab") == "two\nlines\tand a tab"


# --- the page stays true ----------------------------------------------------------------------


def test_docs_secrets_names_every_allowlisted_variable_and_every_preset_key() -> None:
    from tenure.executors.environment import BASE_NAMES, BASE_PREFIXES, NEVER_NAMES

    page = (Path(__file__).resolve().parents[2] / "docs" / "secrets.md").read_text()
    for name in sorted(BASE_NAMES | NEVER_NAMES):
        assert f"`{name}`" in page, name
    for prefix in BASE_PREFIXES:
        assert f"`{prefix}*`" in page, prefix
    for agent, keys in PRESET_KEYS.items():
        assert f"`{agent}`" in page and all(f"`{k}`" in page for k in keys), agent
    assert "no inherited `GIT_*`" in page  # git gets none of the caller's git settings
