"""The ``tenure`` command: every subcommand module registers itself on ``app``."""

from __future__ import annotations

from tenure.console import (
    coding_cmds,
    decisions_cmds,
    demo,
    inbox_cmds,
    keys_cmds,
    member_cmds,
    model_cmds,
    protocol_cmds,
    run_cmds,
    state_cmds,
    trim_cmds,
)
from tenure.console.app import app, run

__all__ = ["app", "main"]
_COMMAND_MODULES = (
    protocol_cmds,
    state_cmds,
    run_cmds,
    member_cmds,
    inbox_cmds,
    keys_cmds,
    model_cmds,
    decisions_cmds,
    demo,
    coding_cmds,
    trim_cmds,
)


def main() -> None:
    run()
