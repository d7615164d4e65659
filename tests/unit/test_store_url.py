"""Store URLs: one strict parser (``store.address``). A URL is a known form or one
``ConfigError`` line naming it (password hidden) — never another exception, and never
a file or directory made for it."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.protocol.errors import ConfigError, StoreMissing, StoreUnavailable
from tenure.store import open_store
from tenure.store.address import parse_store_url
from tenure.store.sqlite import connection
from tenure.store.url import sqlite_path


@contextmanager
def empty_cwd() -> Iterator[Path]:
    """A fresh working directory (hypothesis runs many examples per test function)."""
    before = Path.cwd()
    with tempfile.TemporaryDirectory() as name:
        os.chdir(name)
        try:
            yield Path(name)
        finally:
            os.chdir(before)


PREFIXES = [
    "",
    "sqlite:",
    "sqlite:/",
    "sqlite://",
    "sqlite:///",
    "sqlite:////",
    "redis:",
    "redis:/",
    "redis://",
    "rediss://",
    "unix://",
    "unix:///",
    "memory:",
    "memory://",
    "postgres://",
    "./",
    "/",
]
PIECES = st.lists(
    st.sampled_from([*"abz09:/@?&=#%._-+ \\", "..", ".db", "\x00", "é", "\n", "6379", "prefix="]),
    max_size=16,
).map("".join)
URLS = st.one_of(st.text(max_size=40), st.builds(lambda p, r: p + r, st.sampled_from(PREFIXES), PIECES))


@settings(max_examples=400, deadline=None)
@given(URLS)
def test_any_url_parses_or_is_one_config_error_line_and_creates_nothing(url: str) -> None:
    with empty_cwd() as cwd:
        try:
            address = parse_store_url(url)
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("store URL")
            if url:  # "" is "the default" to open_store
                with pytest.raises(ConfigError):
                    open_store(url)  # a writer refuses it the same way, before creating
        else:
            assert address.kind in ("sqlite", "redis", "memory")
            assert (address.path is not None) == (address.kind == "sqlite")
            if address.kind == "sqlite":  # a reader finds no store and makes none
                with pytest.raises(StoreMissing, match="^no store at "):
                    open_store(url, create=False)
        assert list(cwd.iterdir()) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abc:@%!", min_size=1, max_size=12))
def test_a_password_never_shows_in_the_refusal(secret: str) -> None:
    url = f"redis://user:{secret}zz9pw@:99999/x"
    with pytest.raises(ConfigError) as caught:
        parse_store_url(url)
    assert "zz9pw" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "kind", "path"),
    [
        ("sqlite:///state.db", "sqlite", "state.db"),
        ("sqlite:///.tenure/state.db", "sqlite", ".tenure/state.db"),
        ("sqlite:////var/lib/tenure/x.db", "sqlite", "/var/lib/tenure/x.db"),
        ("sqlite:///run.sqlite3", "sqlite", "run.sqlite3"),
        ("team.db", "sqlite", "team.db"),
        ("data/team.sqlite", "sqlite", "data/team.sqlite"),
        ("redis://127.0.0.1:6379/0", "redis", None),
        ("redis://cache", "redis", None),
        ("redis://:pw@cache:6380/3?prefix=acme&socket_timeout=2", "redis", None),
        ("rediss://ops:pw@cache.example.com:6380/1", "redis", None),
        ("unix:///run/redis.sock?db=2", "redis", None),
        ("memory://", "memory", None),
        ("memory://shared-1", "memory", None),
    ],
)
def test_the_documented_forms_are_accepted(url: str, kind: str, path: str | None) -> None:
    address = parse_store_url(url)
    assert address.kind == kind
    assert address.path == (Path(path) if path else None)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("garbage", "not a store URL"),
        ("state", "a bare path must end in .db"),
        ("redis:/host:1/0", "write redis://HOST:PORT/DB"),
        ("redis://", "the host is missing"),
        ("redis:///0", "the host is missing"),
        ("redis://host:0/0", "the port is a number from 1 to 65535"),
        ("redis://host:70000/0", "the port is a number from 1 to 65535"),
        ("redis://host:port/0", "the port is a number from 1 to 65535"),
        ("redis://host:6379/zero", "the database is a number"),
        ("redis://host:6379/0?prefx=a", "unknown option 'prefx'"),
        ("redis://host:6379/0?socket_timeout=0", "socket_timeout= is a positive number"),
        ("redis://host:6379/1?db=2", "the database is given twice"),
        ("unix://", "the socket path is missing"),
        ("sqlite://state.db", "write sqlite:///state.db"),
        ("sqlite:///", "the SQLite file path is empty"),
        ("sqlite:///dir/", "names a directory"),
        ("sqlite:///x.db?mode=ro", "takes no options"),
        ("postgres://db/x", "unknown scheme 'postgres'"),
        ("memory://a/b", "memory://NAME"),
        ("  ", "store URL is empty"),
    ],
)
def test_a_wrong_url_is_one_line_naming_it_and_what_was_expected(url: str, says: str) -> None:
    with empty_cwd() as cwd:
        with pytest.raises(ConfigError) as caught:
            open_store(url)
        line = str(caught.value)
        assert says in line and "\n" not in line
        if url.strip():
            assert repr(url) in line
        assert list(cwd.iterdir()) == []


def test_a_password_in_a_refused_url_is_redacted() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_url("redis://ops:hunter22@:6379/0")
    assert "hunter22" not in str(caught.value) and "ops:***@" in str(caught.value)


def test_a_reader_never_creates_the_database_or_its_directories(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nonexistent' / 'dir' / 'x.db'}"
    with pytest.raises(StoreMissing, match="nonexistent/dir/x.db"):
        open_store(url, create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_reader_opens_an_existing_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with open_store(url) as store:
        store.append_event("alpha", "hello", {})
    with open_store(url, create=False) as store:
        assert store.teams() == ["alpha"]


def test_sqlite_path_refuses_a_url_of_another_backend() -> None:
    assert sqlite_path("sqlite:///a/b.db") == Path("a/b.db")
    with pytest.raises(ConfigError, match="not a SQLite store"):
        sqlite_path("redis://localhost:6379/0")


def test_a_file_that_is_not_a_database_is_refused_and_its_connection_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection opened before the file turned out not to be SQLite is closed, not
    left for the garbage collector (Python 3.13 warns: unclosed database)."""
    made: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def recorded(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        made.append(connect(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(connection.sqlite3, "connect", recorded)
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are notes, not a database" * 100)
    with pytest.raises(StoreUnavailable, match="cannot open SQLite store"):
        open_store(f"sqlite:///{path}")
    [conn] = made
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
