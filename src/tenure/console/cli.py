"""The ``tenure`` command: every subcommand module registers itself on ``app``."""

from __future__ import annotations

from tenure.console import (
    a2a_cmds,
    agents_cmds,
    coding_cmds,
    decisions_cmds,
    demo,
    inbox_cmds,
    keys_cmds,
    log_cmds,
    mcp_cmds,
    member_cmds,
    model_cmds,
    protocol_cmds,
    replan_cmds,
    report_cmds,
    run_cmds,
    runs_cmds,
    state_cmds,
    trim_cmds,
    watch_cmds,
)
from tenure.console.app import app, run

__all__ = ["app", "main"]
_COMMAND_MODULES = (
    protocol_cmds,
    state_cmds,
    log_cmds,
    runs_cmds,
    run_cmds,
    member_cmds,
    inbox_cmds,
    keys_cmds,
    model_cmds,
    decisions_cmds,
    demo,
    coding_cmds,
    agents_cmds,
    replan_cmds,
    trim_cmds,
    watch_cmds,
    mcp_cmds,
    report_cmds,
    a2a_cmds,
)


def main() -> None:
    run()
