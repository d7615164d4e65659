"""What ``tenure run`` shows while a team works (a live table of its register, a tree
of teams for a nested plan) and the summary line and exit status it ends with."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Group, RenderableType
from rich.live import Live

from tenure.console import jsonout
from tenure.console.app import fail, out
from tenure.console.exits import Exit, settled_exit
from tenure.console.processes import Terminated
from tenure.console.safe import safe_text
from tenure.console.state_cmds import team_table
from tenure.console.team_data import team_data
from tenure.console.tree import team_tree_table
from tenure.protocol import Plan, TenureError
from tenure.protocol.clip import clip
from tenure.protocol.plan import team_tree
from tenure.roles.register import plan_settled
from tenure.roles.teams import reading
from tenure.store import Store

STOP_WAIT = 15.0
"""Seconds a stopped run waits for its leader and in-process members to end."""


def watch(
    store: Store,
    plan: Plan,
    body: Callable[[threading.Event], object],
    stop: threading.Event,
    check: Callable[[], str | None] = lambda: None,
    *,
    live: bool = True,
) -> str | None:
    """Run ``body(stop)`` in a thread while a live table shows the register; ``check``
    each round (the member processes) may end it with a reason, which is returned.
    What ``body`` raised (a lost store, say) is raised here, as one line, not a
    thread's traceback."""
    failed: list[BaseException] = []
    ended = threading.Event()  # not Thread.join: a signal interrupting a join marks the
    # thread as ended (CPython before 3.13), and the members would not be waited for

    def guarded(halt: threading.Event) -> None:
        try:
            body(halt)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failed.append(exc)
            halt.set()
        finally:
            ended.set()

    worker = threading.Thread(target=guarded, args=(stop,), daemon=True)
    worker.start()
    why: str | None = None
    try:
        with _shown(store, plan, live) as show:
            while not ended.wait(timeout=0.25):
                why = why or check()
                if why is not None:
                    stop.set()
                show()
    except (KeyboardInterrupt, Terminated):
        stop.set()
        ended.wait(timeout=STOP_WAIT)  # its members release what they hold and leave
        raise
    finally:
        if live:
            out.print()  # what follows (the summary, an error line) starts a line of its own
    if failed:
        if isinstance(failed[0], TenureError):
            raise failed[0]  # a lost store, say: one line, with its own exit status
        raise fail(f"the run stopped: {one_line(failed[0])}")
    return why


@contextmanager
def _shown(store: Store, plan: Plan, live: bool) -> Iterator[Callable[[], None]]:
    """A refresh for the live table (a no-op without one: ``--json``)."""
    if not live:
        yield lambda: None
        return
    # Transient, then printed once in full: a live frame taller than the terminal is cut
    # to its height (and a terminal-less run shows only that last frame).
    with Live(view(store, plan), console=out, refresh_per_second=4, transient=True) as shown:
        yield lambda: shown.update(view(store, plan))
    out.print(view(store, plan))


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    said = clip(text[0], 500) if text else ""
    return f"{type(exc).__name__}: {said}"


def view(store: Store, plan: Plan) -> RenderableType:
    """The team's table; a nested plan's tree of teams above it."""
    teams = [each.team for each in team_tree(plan)]
    if len(teams) == 1:
        return team_table(store, plan.team)
    return Group(team_tree_table(store, teams), team_table(store, plan.team))


def summary(store: Store, plan: Plan, elapsed: float, *, as_json: bool = False) -> int:
    """0: every task done; 3: some wait for a person; 1: the run stopped before the
    plan settled (nothing registered, or tasks still open). ``as_json``: the summary
    is ``run``'s JSON document (the error line, if any, still on stderr)."""
    tasks = reading.tasks(store, plan.team)
    states = Counter(reading.state_of(t) for t in tasks)
    parts = ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "no tasks"
    settled = bool(tasks) and plan_settled(tasks)
    code = settled_exit(states) if settled else Exit.ERROR
    if as_json:
        teams = [team_data(store, each.team) for each in team_tree(plan)]
        outcome = {Exit.OK: "done", Exit.WAITING: "waiting"}.get(code, "stopped")
        jsonout.emit(
            "run",
            team=plan.team,
            outcome=outcome,
            exit=int(code),
            elapsed_seconds=round(elapsed, 3),
            teams=teams,
        )
    else:
        out.print(f"[bold]{safe_text(plan.team)}[/]: {parts} in {elapsed:.1f}s")
    if not settled:
        raise fail(f"the run stopped before {plan.team}'s plan settled: {parts}")
    waiting = states["blocked"] + states["failed"] + states["tampered"]
    if waiting and not as_json:
        out.print(f"{waiting} task(s) need a person: see [bold]tenure inbox[/]")
    return code
