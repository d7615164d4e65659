"""``Team``: a plan run by a leader and its workers in this process, from Python.

The whole API of a local run in one object: give it a plan, a store and what does
the work, call ``run()``, act on the ``RunResult``. Underneath it is ``LocalTeam``
(leader and followers as threads, every write still fenced), so a run that stops —
a timeout, a crash, a task waiting for a person — is resumed by running it again
on the same store, by ``tenure run``, or by a ``tenure leader`` process.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeAlias, cast

from tenure.coord import LeaseTiming
from tenure.executors import Executor, PythonExecutor, TaskContext, failed, resolve_executor
from tenure.protocol import ConfigError, Plan, TaskEnvelope, TaskResult, load_plan
from tenure.protocol.plan import team_tree
from tenure.roles.features import Splitter, standard_hooks
from tenure.roles.leader import Hooks, LeaderHook
from tenure.roles.member.slots import check_concurrency
from tenure.roles.register.standing import plan_standing
from tenure.roles.teams.local import LocalTeam
from tenure.roles.teams.result import RunResult, read_result
from tenure.store import Store, open_store
from tenure.verify import Trust

__all__ = ["ExecutorLike", "Team", "team_executor"]

TaskFunction: TypeAlias = Callable[[TaskEnvelope, TaskContext], Any]
ExecutorLike: TypeAlias = Executor | str | TaskFunction
"""An executor, a spec (``noop``, ``command:...``, ``python:mod:fn``, ``llm:...``) or a
function ``fn(envelope, ctx)`` returning an artifact or a result."""


class Team:
    """A plan, a store and an executor: ``run()`` works the plan and says how it ended.

    ``executor`` is an ``ExecutorLike``, or a mapping ``{task_id: ExecutorLike}``
    that gives each task its own (a quorum voter ``t.q1.v2`` runs ``t``'s). A task
    whose plan entry names an ``executor:`` runs that one. ``store`` is a ``Store``
    or a URL (default ``$TENURE_STORE``, else ``sqlite:///.tenure/state.db``); a URL
    is opened for each run, so ``memory://`` forgets between runs: pass an opened
    store to keep it. ``workdir`` is where tasks and command checks run; ``hooks``
    are leader hooks of your own, after the standard features; ``trust`` gives the
    judge models; ``splitter`` lets the planner split a task out of attempts.
    ``concurrency`` is how many attempts each worker runs at once (its slots, threads):
    1 for agent CLIs, more (8 to 64) for model calls, which mostly wait on the network.
    """

    def __init__(
        self,
        plan: Plan | str | Path,
        *,
        executor: ExecutorLike | Mapping[str, ExecutorLike],
        store: Store | str | None = None,
        workers: int = 2,
        concurrency: int = 1,
        workdir: str | Path | None = None,
        hooks: Sequence[LeaderHook] = (),
        trust: Trust | None = None,
        ttl: float = 3.0,
        splitter: Splitter | None = None,
    ) -> None:
        self.plan = plan if isinstance(plan, Plan) else load_plan(plan)
        if len(team_tree(self.plan)) > 1:
            raise ConfigError(
                f"plan {self.plan.team!r} has nested teams: their sub-leaders are processes; "
                "run it with `tenure run PLAN`"
            )
        if workers < 1:
            raise ConfigError(f"workers: at least 1, got {workers}")
        check_concurrency(concurrency)
        if not ttl > 0:
            raise ConfigError(f"ttl: a lease TTL in seconds > 0, got {ttl}")
        self.executor = team_executor(executor, self.plan)
        self.hooks = list(hooks)
        Hooks([*standard_hooks(splitter=splitter), *self.hooks]).check_options(self.plan)
        self.store = store
        self.workers = workers
        self.concurrency = concurrency
        self.workdir = Path(workdir) if workdir is not None else None
        self.trust = trust
        self.ttl = ttl
        self.splitter = splitter

    def run(self, timeout: float | None = None) -> RunResult:
        """Work the plan until nothing can move without a person, or ``timeout``
        seconds pass; then read how it ended from the register. A store whose team runs
        a different plan refuses it (``ConfigError``): change it with ``tenure.replan``."""
        started = time.monotonic()
        stop = threading.Event()
        timer = threading.Timer(timeout, stop.set) if timeout is not None else None
        with self._opened() as store:
            standing = plan_standing(store, self.plan)
            if standing.kind in ("changed", "interrupted"):  # never run with old goals
                raise ConfigError(standing.describe())
            local = LocalTeam(
                store,
                self.plan,
                self.executor,
                workers=self.workers,
                concurrency=self.concurrency,
                timing=LeaseTiming(ttl=self.ttl),
                workdir=self.workdir,
                splitter=self.splitter,
                trust=self.trust,
                hooks=self.hooks,
            )
            if timer is not None:
                timer.daemon = True
                timer.start()
            try:
                local.run(stop)
            finally:
                if timer is not None:
                    timer.cancel()
            return read_result(store, self.plan.team, seconds=time.monotonic() - started)

    @contextmanager
    def _opened(self) -> Iterator[Store]:
        if isinstance(self.store, Store):
            yield self.store
            return
        with open_store(self.store) as store:
            yield store

    def __repr__(self) -> str:
        return f"Team({self.plan.team!r}, tasks={len(self.plan.tasks)}, workers={self.workers})"


def team_executor(value: ExecutorLike | Mapping[str, ExecutorLike], plan: Plan) -> Executor:
    """The executor ``value`` names; a mapping must route every task of ``plan`` that
    names no executor of its own, and nothing else (a typo fails here, not mid-run)."""
    if not isinstance(value, Mapping):
        return _one(value, "executor")
    ids = [t.id for t in plan.tasks]
    unknown = sorted(set(value) - set(ids))
    if unknown:
        raise ConfigError(
            f"executor[{unknown[0]!r}]: plan {plan.team!r} has no such task "
            f"(tasks: {', '.join(ids)})"
        )
    missing = [t.id for t in plan.tasks if t.id not in value and not t.executor]
    if missing:
        raise ConfigError(
            f"executor: no executor for task(s) {', '.join(map(repr, missing))}; "
            "route every task, or give one executor for all"
        )
    return Routes({task_id: _one(each, f"executor[{task_id!r}]") for task_id, each in value.items()})


def _one(value: ExecutorLike, field: str) -> Executor:
    if isinstance(value, str):
        return resolve_executor(value, field=field)
    if hasattr(value, "execute"):
        return cast(Executor, value)
    if callable(value):
        _check_signature(value, field)
        return PythonExecutor(value)
    raise ConfigError(
        f"{field}: an Executor, a spec string or a function fn(envelope, ctx); "
        f"got {type(value).__name__}"
    )


def _check_signature(fn: Callable[..., Any], field: str) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or extension callable: it will say so when called
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(fn, "__qualname__", repr(fn))
        raise ConfigError(
            f"{field}: {name}{signature} must take two arguments, (envelope, ctx)"
        ) from None


class Routes:
    """One executor per task id; a quorum voter (``t.q1.v2``) runs its task's."""

    def __init__(self, routes: Mapping[str, Executor]) -> None:
        self.routes = dict(routes)

    def route(self, task_id: str) -> Executor | None:
        while True:
            if task_id in self.routes:
                return self.routes[task_id]
            if "." not in task_id:
                return None
            task_id = task_id.rsplit(".", 1)[0]

    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        executor = self.route(envelope.task_id)
        if executor is None:
            known = ", ".join(sorted(self.routes))
            return failed(envelope, f"no executor for task {envelope.task_id!r} (routes: {known})")
        return executor.execute(envelope, ctx)

    def __repr__(self) -> str:
        return f"Routes({sorted(self.routes)})"
