"""Old flag names, still understood for one release but no longer shown.

One concept, one name across commands: ``--lease-ttl`` for a leader's lease (was
``--ttl``), ``--workdir`` for the directory a team works in (was ``--repo`` for coding
runs and ``--dir`` for the demo), ``--member`` for a member's id (was ``--id`` on
``leader``, ``worker`` and ``mcp``). A script written against the old names keeps working;
``--help`` shows only the new ones."""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

OLD_FLAGS: dict[str, dict[str, str]] = {
    "run": {"--ttl": "--lease-ttl"},
    "leader": {"--ttl": "--lease-ttl", "--id": "--member"},
    "worker": {"--id": "--member"},
    "mcp": {"--id": "--member"},
    "demo": {"--ttl": "--lease-ttl", "--dir": "--workdir"},
    "code": {"--repo": "--workdir"},
    "gc": {"--repo": "--workdir"},
    "discard": {"--repo": "--workdir"},
    "replan": {"--repo": "--workdir"},
}
"""Per command: old flag -> its name now."""


def renamed(command: str, args: list[str]) -> list[str]:
    """``args`` with each old flag of ``command`` (``--ttl 5`` or ``--ttl=5``) under its
    new name; nothing after a ``--`` is touched (it is a value, not a flag)."""
    table = OLD_FLAGS.get(command, {})
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            return out + args[index:]
        flag, sep, value = arg.partition("=")
        out.append(table[flag] + sep + value if flag in table else arg)
    return out


class AliasingGroup(TyperGroup):
    """The root command group: renames old flags before the subcommand parses them."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        return name, command, renamed(name or "", rest)
