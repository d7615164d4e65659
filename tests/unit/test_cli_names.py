"""Names and arguments on the command line: a wrong store URL, a missing store, a number
out of range, a team path leading out, a mistyped team — each one line on stderr, a
non-zero exit, no traceback, nothing made.

The command runs through its real entry point (``tenure.console.app.run``: argument
parsing, the one-line error handling, the exit status) in this process, with its own
working directory, environment and streams; ``test_*_in_a_real_process`` run the same
checks as ``python -m tenure`` processes, so the entry point is the one a shell gets."""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import subprocess
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import LEASE_TOKEN, redis_or_skip, wipe_redis
from tenure.console import params
from tenure.console.app import run
from tenure.console.cli import app
from tenure.protocol.secrets import redact_url
from tenure.store import open_store

TEAMS = ("alpha", "beta")
PLAN = "team: alpha\ntasks:\n  - {id: t1, goal: say hello}\n"


def process(cwd: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    """``tenure ARGS`` as a ``python -m tenure`` process."""
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("TENURE_STORE", None)
    if store is not None:
        env["TENURE_STORE"] = store
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def tenure(cwd: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    """``tenure ARGS`` through the command's entry point, in this process: in ``cwd``,
    with ``TENURE_STORE`` set to ``store`` (or unset), its streams captured."""
    saved = (os.getcwd(), sys.argv, os.environ.get("TENURE_STORE"))
    stdout, stderr = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    os.chdir(cwd)
    sys.argv = ["tenure", *args]
    if store is None:
        os.environ.pop("TENURE_STORE", None)
    else:
        os.environ["TENURE_STORE"] = store
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                run()
            except SystemExit as exc:
                code = exc.code
    finally:
        os.chdir(saved[0])
        sys.argv = saved[1]
        if saved[2] is None:
            os.environ.pop("TENURE_STORE", None)
        else:
            os.environ["TENURE_STORE"] = saved[2]
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(args, returncode, stdout.getvalue(), stderr.getvalue())


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single error line a refused command printed (and nothing on stdout)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def files_under(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "plan.yaml").write_text(PLAN)
    return work


# every command, with what it needs besides --store and --team
STORE_COMMANDS: dict[str, tuple[str, ...]] = {
    "status": ("status",),
    "log": ("log",),
    "inbox": ("inbox",),
    "decisions": ("decisions",),
    "dead-letters": ("dead-letters", "-t", "alpha"),
    "trim": ("trim", "-t", "alpha", "--older-than", "1d"),
    "answer": ("answer", "t1", "yes", "-t", "alpha"),
    "cancel": ("cancel", "t1", "-t", "alpha"),
    "watch": ("watch", "--once"),
    "leader": ("leader", "plan.yaml", "--insecure"),
    "worker": ("worker", "-t", "alpha", "--insecure"),
    "run": ("run", "plan.yaml", "--mode", "local"),
}
READERS = (
    "status",
    "log",
    "inbox",
    "decisions",
    "dead-letters",
    "trim",
    "answer",
    "cancel",
    "watch",
)


# --- store URLs ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(STORE_COMMANDS))
def test_a_store_url_without_a_scheme_is_refused_by_every_command(
    empty: Path, command: str
) -> None:
    before = files_under(empty)
    done = tenure(empty, *STORE_COMMANDS[command], "--store", "garbage")
    assert done.returncode == 2
    assert "store URL 'garbage': not a store URL" in one_line(done)
    assert files_under(empty) == before  # no file named garbage


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis:/host:1/0", "write redis://HOST:PORT/DB"),
        ("redis://", "the host is missing"),
        ("redis://:hunter22@/0", "the host is missing"),
        ("redis://127.0.0.1:6379/x", "the database is a number"),
        ("sqlite://state.db", "write sqlite:///state.db"),
        ("mysql://db/x", "unknown scheme 'mysql'"),
    ],
)
def test_a_wrong_store_url_is_one_line_and_makes_nothing(empty: Path, url: str, says: str) -> None:
    before = files_under(empty)
    for given in (("--store", url), ()):  # the flag, and TENURE_STORE
        done = tenure(empty, "status", *given, store=None if given else url)
        assert done.returncode == 2
        line = one_line(done)
        assert says in line and redact_url(url) in line and "hunter22" not in line
    assert files_under(empty) == before


@pytest.mark.parametrize("command", READERS)
def test_a_missing_store_is_named_and_not_created(empty: Path, command: str) -> None:
    before = files_under(empty)
    done = tenure(empty, *STORE_COMMANDS[command], "--store", "sqlite:///nonexistent/dir/x.db")
    assert done.returncode == 1
    assert one_line(done) == (
        "error: no store at nonexistent/dir/x.db (start a team with tenure run or tenure leader)"
    )
    assert files_under(empty) == before


def test_a_redis_prefix_no_team_wrote_to_is_no_store(empty: Path) -> None:
    url = redis_or_skip()  # a fresh key prefix: nothing there
    done = tenure(empty, "status", store=url)
    assert done.returncode == 1
    assert one_line(done).startswith(f"error: no store at {redact_url(url)} (no team under")
    with open_store(url) as store:
        assert store.teams() == []  # and reading made nothing


# --- numbers -------------------------------------------------------------------------------


TTL = "a finite number of seconds from 0.5 to 3600"
BIG = "99999999999999999999999"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("run", "plan.yaml", "--mode", "local", "--lease-ttl", "0"), f"--lease-ttl: {TTL}, got 0.0"),
        (("run", "plan.yaml", "--lease-ttl", "-1"), f"--lease-ttl: {TTL}, got -1.0"),
        (("run", "plan.yaml", "--lease-ttl", "nan"), f"--lease-ttl: {TTL}, got nan"),
        (("run", "plan.yaml", "--lease-ttl", "1e308"), f"--lease-ttl: {TTL}, got 1e+308"),
        (("run", "plan.yaml", "--workers", "0"), "--workers: a whole number from 1 to 64, got 0"),
        (("run", "plan.yaml", "--concurrency", "257"), "--concurrency: a whole number from 1 to 256"),
        (("worker", "--concurrency", "0"), "--concurrency: a whole number from 1 to 256, got 0"),
        (("leader", "plan.yaml", "--lease-ttl", "inf"), f"--lease-ttl: {TTL}, got inf"),
        (("leader", "plan.yaml", "--lease-ttl", "3601"), f"--lease-ttl: {TTL}, got 3601.0"),
        (
            ("leader", "plan.yaml", "--priority", BIG),
            f"--priority: a whole number from -1000000 to 1000000, got {BIG}",
        ),
        (
            ("worker", "--priority", f"-{BIG}"),
            f"--priority: a whole number from -1000000 to 1000000, got -{BIG}",
        ),
        (("worker", "--member-ttl", "0.1"), f"--member-ttl: {TTL}, got 0.1"),
        (("worker", "--member-ttl", "1e308"), f"--member-ttl: {TTL}, got 1e+308"),
        (
            ("worker", "--visibility", "0"),
            "--visibility: a finite number of seconds above 0 and at most 604800, got 0.0",
        ),
        (
            ("worker", "--visibility", "inf"),
            "--visibility: a finite number of seconds above 0 and at most 604800, got inf",
        ),
        (
            ("replan", "plan.yaml", "--timeout", "1e308"),
            "--timeout: a finite number of seconds above 0 and at most 604800, got 1e+308",
        ),
        (("mcp", "--member-ttl", "inf"), f"--member-ttl: {TTL}, got inf"),
        (("watch", "--interval", "1e308"), "--interval: a finite number of seconds from 0.1 to"),
        (("agents", "--timeout", "inf"), "--timeout: a finite number of seconds from 0.1 to"),
        (("log", "--limit", "-5"), "--limit: a whole number of at least 1, got -5"),
        (("log", "--limit", "0"), "--limit: a whole number of at least 1, got 0"),
        (("log", "--limit", BIG), f"--limit: a whole number of at most {2**63 - 1} (64 bits)"),
        (("log", "--after", "-1"), "--after: a whole number of at least 0, got -1"),
        (("log", "--after", BIG), f"--after: a whole number of at most {2**63 - 1} (64 bits)"),
        (("log", "--limit", "many"), "--limit: "),
        (("trim", "-t", "a", "--older-than", f"{BIG}d"), "--older-than: at most 36500d"),
        (("code", "plan.yaml", "--workers", "0"), "--workers: a whole number from 1 to 64, got 0"),
        (("code", "plan.yaml", "--workers", BIG), "--workers: a whole number from 1 to 64"),
        (("code", "plan.yaml", "--lease-ttl", "0"), f"--lease-ttl: {TTL}, got 0.0"),
        (("demo", "--ttl", "0"), f"--lease-ttl: {TTL}, got 0.0"),
        (("a2a", "serve", "-t", "a", "--port", "65536"), "--port: a whole number from 0 to 65535"),
    ],
)
def test_a_number_out_of_range_is_one_line_exit_2_and_starts_nothing(
    empty: Path, args: tuple[str, ...], says: str
) -> None:
    before = files_under(empty)
    done = tenure(empty, *args)
    assert done.returncode == 2
    assert one_line(done).startswith(f"error: {says}")
    assert files_under(empty) == before


def _commands(typer_app: typing.Any) -> Iterator[tuple[str, Callable[..., object]]]:
    for command in typer_app.registered_commands:
        yield command.name or command.callback.__name__, command.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance)


def _options(function: Callable[..., object]) -> Iterator[tuple[str, set[type], typing.Any]]:
    for name, hint in typing.get_type_hints(function, include_extras=True).items():
        if typing.get_origin(hint) is not typing.Annotated:
            continue
        base, info, *_ = typing.get_args(hint)
        union = typing.get_origin(base) in (typing.Union, types.UnionType)
        kinds = set(typing.get_args(base)) - {type(None)} if union else {base}
        yield name, kinds, info


def test_every_numeric_flag_of_every_command_is_checked() -> None:
    unchecked = [
        f"{command} {name}"
        for command, function in _commands(app)
        for name, kinds, info in _options(function)
        if kinds & {int, float} and info.callback is None
    ]
    assert unchecked == []


def test_every_team_store_and_id_flag_is_checked() -> None:
    expected = {"team": params.team, "store": params.store, "member_id": params.ident}
    wrong = []
    for command, function in _commands(app):
        for name, _, info in _options(function):
            if name in expected and info.callback is not expected[name]:
                wrong.append(f"{command} --{name}")
    assert wrong == []
    assert inspect.signature(params.team).parameters  # a real callback, not a placeholder


# --- team paths ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("leader", "plan.yaml", "--insecure"),
        ("worker", "--insecure"),
        ("status",),
        ("run", "plan.yaml"),
        ("keys", "init"),
    ],
)
def test_a_team_path_leading_out_is_refused_before_anything_is_written(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    deep = tmp_path / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "plan.yaml").write_text(PLAN)
    before = files_under(tmp_path)
    done = tenure(deep, *command, "--team", "../../../../escaped", store="sqlite:///s.db")
    assert done.returncode == 2
    assert (
        one_line(done) == "error: --team: each part between '/': no '..', got '../../../../escaped'"
    )
    assert files_under(tmp_path) == before  # no epoch file, key or store, inside or out


@pytest.mark.parametrize(
    "args",
    [
        ("worker", "--insecure", "--member", "../../w1"),
        ("leader", "plan.yaml", "--insecure", "--id", "/tmp/l1"),  # the old name too
        ("keys", "add", "--team", "alpha", "--member", "../w1"),
    ],
)
def test_an_id_that_would_name_a_file_outside_is_refused(
    empty: Path, args: tuple[str, ...]
) -> None:
    before = files_under(empty.parent)
    done = tenure(empty, *args, store="sqlite:///s.db")
    assert done.returncode == 2
    assert one_line(done).startswith("error: --member: ")  # one name, also given as --id
    assert files_under(empty.parent) == before


# --- unknown teams, on both backends --------------------------------------------------------


@pytest.fixture
def two_teams(store_url: str) -> str:
    """A store (SQLite or Redis) that knows the teams alpha and beta."""
    with open_store(store_url) as store:
        store.claim_lease("alpha", "lead", 30.0, token=LEASE_TOKEN)
        store.append_event("beta", "hello", {})
    return store_url


@pytest.mark.parametrize("command", READERS)
def test_a_mistyped_team_names_the_teams_the_store_has(
    two_teams: str, empty: Path, command: str
) -> None:
    args = [a if a != "alpha" else "alhpa" for a in STORE_COMMANDS[command]]
    if "-t" not in args:
        args += ["--team", "alhpa"]
    done = tenure(empty, *args, store=two_teams)
    assert done.returncode == 1
    assert (
        one_line(done) == f"error: no team 'alhpa' in {redact_url(two_teams)}; teams: alpha, beta"
    )
    with open_store(two_teams) as store:
        assert sorted(store.teams()) == list(TEAMS)  # nothing was made for the typo


def test_a_known_team_and_a_parent_of_nested_teams_are_shown(two_teams: str, empty: Path) -> None:
    with open_store(two_teams) as store:
        store.append_event("acme/research", "hello", {})
    for team in ("alpha", "acme"):
        done = tenure(empty, "status", "--team", team, store=two_teams)
        assert done.returncode == 0, done.stderr
    logged = tenure(empty, "log", "--team", "beta", "--limit", "1", store=two_teams)
    assert logged.returncode == 0 and "hello" in logged.stdout


def test_keys_show_of_a_team_without_keys_names_those_with_keys(empty: Path) -> None:
    keys = empty / "keys"
    assert tenure(empty, "keys", "init", "--team", "alpha", "--keys", str(keys)).returncode == 0
    before = files_under(empty)
    done = tenure(empty, "keys", "show", "--team", "alhpa", "--keys", str(keys))
    assert done.returncode == 1
    assert (
        "no keys for team 'alhpa'" in one_line(done) and "(teams with keys: alpha)" in done.stderr
    )
    assert files_under(empty) == before


# --- files named on the command line --------------------------------------------------------

FILE_READERS = {
    "run": ("run", "{f}", "--mode", "local"),
    "leader": ("leader", "{f}", "--insecure"),
    "code": ("code", "{f}"),
    "replan": ("replan", "{f}", "--reason", "r"),
    "replan --run": ("replan", "{f}", "--run", "r1", "--reason", "r"),
    "validate": ("validate", "{f}"),
    "keys init": ("keys", "init", "--plan", "{f}"),
}


@pytest.mark.parametrize("command", sorted(FILE_READERS))
@pytest.mark.parametrize("name", ["nope.yaml", "folder"])
def test_a_file_that_cannot_be_read_is_exit_2_in_every_command(
    empty: Path, command: str, name: str
) -> None:
    """Missing or a directory: a usage error, the same status whichever command reads it."""
    (empty / "folder").mkdir()
    before = files_under(empty)
    args = [a.format(f=name) for a in FILE_READERS[command]]
    done = tenure(empty, *args, store="sqlite:///s.db")
    assert done.returncode == 2, done.stderr
    line = one_line(done)
    assert line.startswith(f"error: {name}: ") and "read" in line, line
    assert files_under(empty) == before


# --- a refused member command makes nothing ----------------------------------------------

BAD_OPTION = "team: alpha\ntasks:\n  - {id: t1, goal: g, options: {colour: red}}\n"
REFUSED = {
    "leader without its key": ("leader", "plan.yaml"),
    "leader of a plan with an unknown option": ("leader", "bad.yaml", "--insecure"),
    "worker without its key": ("worker", "-t", "alpha", "--id", "w1"),
    "worker without an id or a key": ("worker", "-t", "alpha", "--priority", "5"),
    "mcp without its key": ("mcp", "-t", "alpha", "--member", "w1"),
    "a2a serve without its key": ("a2a", "serve", "-t", "alpha", "--port", "0"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_member_command_refused_before_it_starts_makes_no_store(
    tmp_path: Path, empty: Path, store_url: str, case: str
) -> None:
    """Keys, plan and flags are checked before the store is opened: no database or
    directory on SQLite, not one key on Redis (not even the store's identity)."""
    url = store_url.replace(str(tmp_path), str(tmp_path / "nd10"))  # a directory to make
    (empty / "bad.yaml").write_text(BAD_OPTION)
    before = files_under(tmp_path)
    done = tenure(empty, *REFUSED[case], "--keys", str(tmp_path / "keys"), store=url)
    assert done.returncode == 1, done.stderr
    line = one_line(done)
    assert ("key" in line and "--insecure" in line) or "colour" in line, line
    assert files_under(tmp_path) == before
    if url.startswith("redis"):
        assert wipe_redis(url) == 0


def test_a_worker_without_an_id_is_told_to_give_one() -> None:
    """Its id would be drawn at random: a key made for that one would never be used."""
    done = tenure(Path.cwd(), "worker", "-t", "alpha", "--keys", "no-such-keys")
    line = one_line(done)
    assert "it has no --id" in line and "--member ID`, then --id ID" in line, line
    assert "worker-" not in line


# --- the same, as python -m tenure processes ---------------------------------------------


def test_a_store_url_without_a_scheme_is_refused_in_a_real_process(empty: Path) -> None:
    before = files_under(empty)
    done = process(empty, "status", "--store", "garbage")
    assert done.returncode == 2
    assert "store URL 'garbage': not a store URL" in one_line(done)
    assert files_under(empty) == before


def test_a_number_out_of_range_is_one_line_in_a_real_process(empty: Path) -> None:
    done = process(empty, "log", "--limit", "-5")
    assert done.returncode == 2
    assert one_line(done) == "error: --limit: a whole number of at least 1, got -5"


def test_a_mistyped_team_is_named_in_a_real_process(two_teams: str, empty: Path) -> None:
    done = process(empty, "status", "--team", "alhpa", store=two_teams)
    assert done.returncode == 1
    assert (
        one_line(done) == f"error: no team 'alhpa' in {redact_url(two_teams)}; teams: alpha, beta"
    )
