"""Checked command-line values, once for every command.

Each numeric flag, team path, member id and store URL is checked by its option's
callback before the command body runs: a bad value is one line naming the flag and
what was expected (``--lease-ttl: a finite number of seconds from 0.5 to 3600, got 0.0``),
exit status 2, and nothing has started or been written. Every number has a ceiling too:
a value the store or the clock could not hold (a priority past 64 bits, a TTL of
``1e308``) is refused here rather than failing deep inside a member. The limits live
here so every command agrees on them (the table in ``docs/operations.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

import typer

from tenure.protocol.errors import ConfigError, ProtocolError
from tenure.protocol.ids import check_task_id, check_team
from tenure.protocol.limits import MAX_PRIORITY, MAX_SLOTS, MIN_PRIORITY
from tenure.store.address import parse_store_url

MIN_TTL = 0.5
"""Seconds. A leader renews every 0.3 x TTL and stops acting 20 % before it ends; below
half a second a store call's own latency would make it step down between renewals."""
MAX_TTL = 3600.0
"""Seconds. A lease or a liveness TTL longer than an hour would keep a dead member's place
(a leader's lease, a worker's id) for longer than anyone waits for a failover."""
MAX_WAIT = 7 * 24 * 3600.0
"""Seconds. The longest wait or timeout a flag sets (a visibility timeout, a wait for a
leader, a refresh): a week."""
MAX_INT = 2**63 - 1
"""The largest count or sequence number a flag takes: what a store keeps in 64 bits."""


class FlagError(typer.BadParameter):
    """A flag's value is out of range; the message is plan-loader style ("expected, got")."""


def flag_name(param: Any) -> str:
    """The flag as the user types it (its longest ``--name``), or the argument's name."""
    longs = [opt for opt in getattr(param, "opts", []) if opt.startswith("--")]
    return max(longs, key=len) if longs else str(getattr(param, "name", None) or "value").upper()


def _checked(ok: Callable[[Any], bool], expected: str) -> Callable[..., Any]:
    """A callback refusing any value (of one flag, or each of a repeated flag) not ``ok``."""

    def callback(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None or ctx.resilient_parsing:
            return value
        for each in value if isinstance(value, list | tuple) else [value]:
            if not ok(each):
                raise FlagError(f"{expected}, got {each!r}")
        return value

    return callback


def seconds(minimum: float = 0.0, maximum: float = MAX_WAIT) -> Callable[..., Any]:
    """A duration: finite, above 0 (``minimum=0``) or at least ``minimum`` seconds, and at
    most ``maximum``."""
    if minimum > 0:
        return _checked(
            lambda v: math.isfinite(v) and minimum <= v <= maximum,
            f"a finite number of seconds from {minimum:g} to {maximum:g}",
        )
    return _checked(
        lambda v: math.isfinite(v) and 0 < v <= maximum,
        f"a finite number of seconds above 0 and at most {maximum:g}",
    )


def ttl() -> Callable[..., Any]:
    """A lease or liveness TTL: ``MIN_TTL`` to ``MAX_TTL`` seconds."""
    return seconds(MIN_TTL, MAX_TTL)


def at_least(minimum: int) -> Callable[..., Any]:
    """A count of at least ``minimum`` (and at most ``MAX_INT``, what a store keeps)."""
    below = _checked(lambda v: v >= minimum, f"a whole number of at least {minimum}")
    above = _checked(lambda v: v <= MAX_INT, f"a whole number of at most {MAX_INT} (64 bits)")

    def callback(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        return above(ctx, param, below(ctx, param, value))

    return callback


def between(low: int, high: int) -> Callable[..., Any]:
    """A count from ``low`` to ``high``."""
    return _checked(lambda v: low <= v <= high, f"a whole number from {low} to {high}")


def priority() -> Callable[..., Any]:
    """``--priority``: ``MIN_PRIORITY`` to ``MAX_PRIORITY``."""
    return between(MIN_PRIORITY, MAX_PRIORITY)


ConcurrencyOption = Annotated[
    int,
    typer.Option(
        "--concurrency",
        help=f"Attempts each worker runs at once, 1 to {MAX_SLOTS} (its slots, threads): "
        "1 for agent CLIs in worktrees, 8 to 64 for model calls (docs/operations.md).",
        callback=between(1, MAX_SLOTS),
    ),
]


def _from(check: Callable[[str], object]) -> Callable[..., Any]:
    """A callback running a protocol check, its one line kept (the flag named in it)."""

    def callback(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None or ctx.resilient_parsing:
            return value
        for each in value if isinstance(value, list | tuple) else [value]:
            try:
                check(each)
            except (ProtocolError, ConfigError) as exc:
                raise FlagError(_without_field(exc)) from None
        return value

    return callback


def _without_field(exc: Exception) -> str:
    return exc.expected if isinstance(exc, ProtocolError) else str(exc)


team = _from(check_team)
"""``--team``: a team path (``acme``, ``acme/research``, ``code/RUN``; see ``check_team``)."""
ident = _from(check_task_id)
"""``--member``, ``--run``: an id that names files and branches (letters,
digits, '.', '_', '-')."""
store = _from(parse_store_url)
"""``--store`` / ``TENURE_STORE``: a URL ``store.address`` accepts."""
