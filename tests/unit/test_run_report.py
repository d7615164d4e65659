"""``tenure report``: a real run's store rendered as one HTML page, checked as text and
as Chromium renders it.

The run: ``fetch`` -> ``flaky`` (its first attempt fails with a reason that carries a
``<script>`` and a known secret) -> ``after``, and ``price`` (one attempt, then the
inbox, answered by the operator). Between the two runs a leader dies holding the
lease, so the second run's leader takes over from it: a failover at a new epoch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tenure
from conftest import LEASE_TOKEN
from tenure.console.cli import app
from tenure.protocol.secrets import register_secret
from tenure.roles.teams.report import dependency_depths, gather
from tenure.store import Store, open_store

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TEAM = "rep"
SECRET = "sk-report-4f9a1c2e7b"
HOSTILE = "<script>document.title='pwned'</script> the first try fails"
PLAN = tenure.Plan.model_validate(
    {
        "team": TEAM,
        "tasks": [
            {"id": "fetch", "goal": "fetch the numbers"},
            {"id": "flaky", "goal": "works the second time", "depends_on": ["fetch"]},
            {"id": "price", "goal": "find the price", "max_attempts": 1},
            {"id": "after", "goal": "use both", "depends_on": ["price", "flaky"]},
        ],
    }
)


def work(envelope: tenure.TaskEnvelope, ctx: tenure.TaskContext) -> Any:
    if envelope.task_id == "flaky" and envelope.attempt == 1:
        raise RuntimeError(HOSTILE)
    if envelope.task_id == "price":
        answers = envelope.input.get("operator_answers")
        if not answers:
            raise RuntimeError(f"the price list is behind a login (key {SECRET})")
        return {"price": answers[-1]["answer"]}
    return {"ok": envelope.task_id}


def run_scenario(store: Store) -> None:
    register_secret(SECRET)
    team = tenure.Team(PLAN, executor=work, store=store)
    assert team.run(timeout=30).outcome == "blocked"
    tenure.answer(store, TEAM, "price", "42 USD")
    store.claim_lease(
        TEAM, "crashed-leader", ttl=0.3, token=LEASE_TOKEN
    )  # it dies holding the lease
    assert team.run(timeout=30).ok


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A real run on a SQLite file, and ``tenure report`` of it written to a file."""
    where = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{where / 'state.db'}"
    with open_store(url) as store:
        run_scenario(store)
    target = where / "report.html"
    result = CliRunner().invoke(app, ["report", "--store", url, "--team", TEAM, "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    return url, target


def test_the_model_pieces_attempts_terms_and_inbox_together(store: Store) -> None:
    run_scenario(store)
    report = gather(store, TEAM)
    assert [r.task_id for r in report.tasks][-1] == "after"
    assert {r.task_id: r.depth for r in report.tasks} == {
        "fetch": 0,
        "price": 0,
        "flaky": 1,
        "after": 2,
    }
    flaky = [a for a in report.attempts if a.task_id == "flaky"]
    assert [(a.attempt, a.status, a.outcome) for a in flaky] == [
        (1, "failed", "retried"),
        (2, "completed", "accepted"),
    ]
    assert HOSTILE in flaky[0].reason
    assert [v.subject for v in flaky[1].verdicts] == ["self-report"]
    price = [a for a in report.attempts if a.task_id == "price"]
    assert [(a.attempt, a.outcome) for a in price] == [(1, "blocked"), (2, "accepted")]
    assert price[0].epoch == 1 and price[1].epoch == 3  # epoch 2 died with its leader
    assert all(a.member and a.member.startswith("worker-") for a in report.attempts)
    assert [(t.holder, t.epoch, t.failover) for t in report.terms] == [
        ("leader", 1, False),
        ("crashed-leader", 2, False),
        ("leader", 3, True),
    ]
    assert [(i.task_id, i.kind) for i in report.inbox] == [
        ("price", "waiting"),
        ("price", "answered"),
    ]
    assert report.inbox[1].text == "42 USD"
    assert sorted((a.task_id, a.attempt) for a in report.failures) == [("flaky", 1), ("price", 1)]


def test_depths_follow_the_longest_path_and_survive_a_cycle() -> None:
    depths = dependency_depths({"a": [], "b": ["a"], "c": ["a", "b"], "x": ["y"], "y": ["x"]})
    assert (depths["a"], depths["b"], depths["c"]) == (0, 1, 2)
    assert sorted((depths["x"], depths["y"])) == [0, 1]


def test_the_page_is_self_contained_and_shows_member_text_as_text(
    page: tuple[str, Path],
) -> None:
    html = page[1].read_text(encoding="utf-8")
    for task_id in ("fetch", "flaky", "price", "after"):
        assert f'data-task="{task_id}"' in html
    assert "<script" not in html.lower()
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert SECRET not in html and "(key ***)" in html
    assert "42 USD" in html  # the inbox history: the answer
    assert "epoch 2: crashed-leader" in html and "epoch 3: leader (failover)" in html
    assert "self-report: passed" in html
    # nothing is fetched: no external URL in a src, href or style, and a CSP forbids it
    assert not re.search(r"(src|href)\s*=\s*\"(https?:)?//", html)
    assert "url(http" not in html and "@import" not in html
    assert "default-src 'none'" in html


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.output


def test_bad_input_is_one_line_and_nothing_is_created(
    tmp_path: Path, page: tuple[str, Path]
) -> None:
    missing = tmp_path / "none.db"
    code, output = invoke("report", "--store", f"sqlite:///{missing}", "--team", TEAM)
    assert code == 1 and "no store at" in output and not missing.exists()
    code, output = invoke("report", "--store", page[0], "--team", "nope")
    assert code == 1 and "no team 'nope'" in output and TEAM in output
    code, output = invoke("report", "--store", page[0], "-o", str(tmp_path / "no" / "r.html"))
    assert code == 2 and "--output: no directory" in output
    assert len(output.strip().splitlines()) == 1


def test_stdout_gets_the_page_and_one_team_needs_no_name(page: tuple[str, Path]) -> None:
    code, output = invoke("report", "--store", page[0], "-o", "-")
    assert code == 0 and output.startswith("<!DOCTYPE html>")
    assert "Team rep" in output


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (apt-get install chromium) to render the report"
        if CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def headless(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",  # as root in a container; the page runs no script anyway
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_chromium_renders_the_page_and_runs_no_injected_script(
    page: tuple[str, Path], tmp_path: Path
) -> None:
    binary = chromium()
    shot = tmp_path / "report.png"
    dom = headless(
        binary,
        tmp_path / "profile",
        "--hide-scrollbars",
        "--window-size=1400,1800",
        f"--screenshot={shot}",
        "--dump-dom",
        page[1].as_uri(),
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    title = re.search(r"<title>(.*?)</title>", rendered, re.S)
    assert title is not None and title.group(1) == "tenure report — rep"  # not 'pwned'
    assert "<script" not in rendered.lower()
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in rendered
    for task_id in ("fetch", "flaky", "price", "after"):
        assert f'data-task="{task_id}"' in rendered
    assert rendered.count("<svg") == 2 and 'data-attempt="flaky:attempt-1"' in rendered
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
