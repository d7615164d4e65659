"""The benchmark scripts still run: each at a tiny size, as a real process, with its
JSON checked. Figures are not judged here (they depend on the machine); only that
every bench starts, finishes and records what it measured."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import redis_or_skip

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
NEW_BENCHES = ["slow_io.py", "llm_calls.py", "dispatch_latency.py", "scale.py", "peers/run.py"]


def run_bench(
    script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


def read(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_every_bench_has_help_with_an_example() -> None:
    """One interpreter for all (cheap): each script's --help exits 0 and shows a command."""
    code = (
        "import runpy, sys, io, contextlib\n"
        "for script in sys.argv[1:]:\n"
        "    sys.argv = [script, '--help']\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n"
        "            runpy.run_path(script, run_name='__main__')\n"
        "        except SystemExit as exc:\n"
        "            assert exc.code in (0, None), (script, exc.code)\n"
        "    text = out.getvalue()\n"
        "    assert '.venv/bin/python bench/' in text and '--quick' in text, (script, text)\n"
        "    print('ok', script)\n"
    )
    scripts = [str(BENCH / s) for s in NEW_BENCHES]
    done = subprocess.run(
        [sys.executable, "-c", code, *scripts],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    ok(done)
    assert done.stdout.count("ok ") == len(NEW_BENCHES)


def test_llm_calls_go_through_the_executor_at_once(tmp_path: Path) -> None:
    out = tmp_path / "llm.json"
    # The bench talks only to the local server it starts itself (on a port of its own).
    allow = {"TENURE_ALLOW_MODEL_REQUESTS": "1"}
    ok(run_bench("llm_calls.py", "--calls", "4", "--delay", "0.2", "--via", "executor",
                 "--json", str(out), env=allow))  # fmt: skip
    (row,) = read(out)["rows"]
    assert row["completed"] == 4 and row["requests"] == 4
    assert row["server_max_in_flight"] == 4  # all four calls were in flight together
    assert row["wall_s"] < 0.2 * 4  # so they overlapped, not one after another


def test_dispatch_latency_reads_both_intervals_from_the_events(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"
    ok(run_bench("dispatch_latency.py", "--tasks", "2", "--modes", "queue", "--stores", "sqlite",
                 "--json", str(out)))  # fmt: skip
    (row,) = read(out)["summary"]
    for name in ("enqueue_to_running_ms", "result_to_accepted_ms"):
        assert row[name]["samples"] == 2
        assert 0 <= row[name]["p50"] <= row[name]["p99"]


def test_scale_quick_runs_a_flat_team_and_a_tree(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    ok(run_bench("scale.py", "--quick", "--out", str(out)))
    summary = read(out)["summary"]
    assert [row["shape"] for row in summary] == ["flat 1x5", "tree 2x5"]
    assert all(row["all_done"] for row in summary)


PEERS = {"celery": "celery", "dramatiq": "dramatiq"}


@pytest.mark.parametrize("system", ["tenure-queue", "celery", "dramatiq"])
def test_slow_io_runs_each_system(system: str, tmp_path: Path) -> None:
    if system in PEERS and importlib.util.find_spec(PEERS[system]) is None:
        pytest.skip(f"{system} is not installed (pip install -e '.[bench]')")
    redis_or_skip()  # the peers' own DBs 10-13 on the same server
    out = tmp_path / "slow.json"
    ok(run_bench("slow_io.py", "--tasks", "4", "--seconds", "0.05", "--workers", "1",
                 "--slots", "2", "--systems", system, "--json", str(out)))  # fmt: skip
    doc = read(out)
    row = doc["summary"][system]
    assert row["errors"] == 0 and row["wall_s"]["median"] > 0
    assert row["peak_rss_mb"]["median"] > 10  # a Python worker process was measured
    assert doc["ideal_wall_s"] == pytest.approx(4 * 0.05 / 2)


def test_peers_run_has_dramatiq_with_its_default_threads(tmp_path: Path) -> None:
    if importlib.util.find_spec("dramatiq") is None:
        pytest.skip("dramatiq is not installed (pip install -e '.[bench]')")
    redis_or_skip()
    out = tmp_path / "noop.json"
    ok(run_bench("peers/run.py", "--workers", "1", "--rounds", "1", "--tasks", "10", "--warm",
                 "2", "--systems", "dramatiq-default", "--json", str(out)))  # fmt: skip
    doc = read(out)
    assert "--threads 8" in doc["systems"]["dramatiq-default"]["workers"]
    assert doc["medians"]["dramatiq-default"]["1"] > 0
