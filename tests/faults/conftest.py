"""A ``team`` of real member processes per test; every one of them dies at teardown."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from .harness import Team


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def team(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Team]:
    team = Team(tmp_path, store_url)
    try:
        yield team
    finally:
        try:
            team.stop_all()
            report = getattr(request.node, "report_call", None)
            if report is None or report.failed:
                print(team.report())
        finally:
            team.close()


STREAMS = {
    "test_store_outages": 0,
    "test_queue_kill": 0,
    "test_leader_kill": 0,
    "test_worker_kill": 0,
    "test_attacks": 1,
    "test_leader_pause": 1,
    "test_duplicates": 1,
    "test_store_loss": 1,
    "test_orphans": 1,
    "test_sizes": 2,
    "test_nested": 2,
    "test_member_ids": 2,
    "test_seals": 2,
}
"""Which of three streams each fault file runs in, about a third of the time each (a
file not named here goes in the last). The scenarios wait on TTLs and real processes
far more than they compute, so three streams overlap their waiting."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` the fault scenarios run in three streams, each on one
    worker, one scenario at a time within it: a stream sees the load a serial run of
    its scenarios would, not every fault scenario at once."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            stream = STREAMS.get(item.path.stem, 2)
            item.add_marker(pytest.mark.xdist_group(f"faults-{stream}"))
