"""The exit-status table in docs/operations.md is the console's ``Exit`` constants."""

from __future__ import annotations

import re
from pathlib import Path

from tenure.console.exits import EXPLAINED, Exit

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def documented() -> dict[int, str]:
    text = DOC.read_text()
    section = text.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def test_the_docs_table_lists_every_exit_status_and_nothing_else() -> None:
    assert documented() == {int(code): text for code, text in EXPLAINED.items()}


def test_every_constant_is_explained() -> None:
    assert set(EXPLAINED) == set(Exit)


def test_the_statuses_people_script_against_keep_their_numbers() -> None:
    assert (Exit.OK, Exit.ERROR, Exit.USAGE, Exit.WAITING, Exit.INTERRUPTED) == (0, 1, 2, 3, 130)
