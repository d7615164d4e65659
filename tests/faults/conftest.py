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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` the fault scenarios run one at a time, on one worker."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("faults"))
