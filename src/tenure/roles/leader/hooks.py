"""Leader features plug in here: hooks the conductor calls at fixed points.

The conductor knows no feature by name. Budgets, quorum, nested teams,
split-before-inbox and coding integration are each a ``LeaderHook`` overriding
a few of the methods below; the conductor calls every hook, in order, at each
point of a task's life (``docs/architecture.md`` has the table):

=====================  ===========================================  ==================
point                  when                                         a hook may
=====================  ===========================================  ==================
``on_takeover``        a new leader finds a task assigned           take it over
``before_dispatch``    a queued task's dependencies are done        hold it, stop it
``on_dispatch``        an attempt is about to be sent               add data, budget
``on_watch``           an assigned attempt is supervised            take it over, wait
``on_tick``            every round                                  act on the register
``on_result``          a result for the current attempt arrives     refuse it
``before_review``      a result is about to be verified             add rungs, decide
``on_accept``          the ladder passed                            finish it itself
``before_retry``       a failure would queue a new attempt          stop the task
``on_exhausted``       the task used up its attempts                handle it (split)
``on_settled``         nothing can move without a person            final work
=====================  ===========================================  ==================

A hook receives a ``LeaderContext`` (what a leader may do, nothing of how it
does it) and the typed ``Task``: its own ``HookContext``, which hands on to the
leader exactly what the protocol lists, so a hook never reaches into the
conductor. A hook declares the task ``options`` it understands: a plan naming an
option no hook declared is refused when it loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Literal, Protocol

from tenure.coord import Credentials
from tenure.protocol import ConfigError, Plan, QuorumCheck, TaskResult
from tenure.protocol.taskspec import AttemptData
from tenure.roles.register import Register, Task
from tenure.store import Member, Store
from tenure.verify import Trust, Verdict

__all__ = [
    "GO",
    "HOLD",
    "Admission",
    "Dispatch",
    "HookContext",
    "Hooks",
    "LeaderContext",
    "LeaderHook",
    "Leading",
    "Review",
    "Stop",
    "Watch",
    "check_options",
]


@dataclass(frozen=True)
class Stop:
    """Stop the task for good (``failed``, in the inbox) with this reason. ``by``: the
    hook that said so (set by the leader, whatever the hook put there)."""

    reason: str
    by: str = ""


GO: Literal["go"] = "go"
HOLD: Literal["hold"] = "hold"  # not by the conductor: the hook dispatches it, or it waits
Admission = Literal["go", "hold"] | Stop
Watch = Literal["moved", "waiting"]  # the hook took the attempt over / asks the leader to wait


@dataclass
class Dispatch:
    """An attempt about to be sent to ``worker``; hooks may add to it. ``new``: a new
    attempt (its ``data`` is written with it); else its envelope is being sent again
    (to an assignee a new leader adopted) and only the envelope's fields count."""

    task: Task
    worker: str
    data: AttemptData
    new: bool = True
    budget: dict[str, float] | None = None  # what the attempt may spend (envelope ``budget``)
    input: dict[str, object] = field(default_factory=dict)  # added to the envelope's input


@dataclass
class Review:
    """What a hook adds to the verification of a result.

    ``verdicts`` are the hook's own checks, applied before the ladder (a failing one
    rejects the result); ``workdir`` is where the ladder's command checks run;
    ``quorum`` and ``from_rung`` give the quorum rung its outcome. ``decided``: the
    hook settled the result itself (e.g. sent it to a person); nothing more runs.
    ``after``: called once the ladder ran, whatever its outcome, before the result
    is accepted or retried (e.g. to remove a scratch checkout made for the checks)."""

    verdicts: list[Verdict] = field(default_factory=list)
    workdir: Path | None = None
    quorum: Callable[[QuorumCheck], Verdict] | None = None
    from_rung: str | None = None
    decided: bool = False
    after: list[Callable[[], None]] = field(default_factory=list)


class LeaderContext(Protocol):
    """What a hook may ask of the leader that calls it."""

    @property
    def store(self) -> Store: ...
    @property
    def team(self) -> str: ...
    @property
    def me(self) -> str: ...
    @property
    def register(self) -> Register: ...
    @property
    def trust(self) -> Trust: ...
    @property
    def workdir(self) -> Path | None: ...
    @property
    def credentials(self) -> Credentials | None:
        """The leading role's, when the team is signed (None: one process, unsigned)."""

    def epoch(self) -> int:
        """The epoch to act under; ``LeaseLost`` once the leader must stop."""

    def now(self) -> float:
        """The store's clock."""

    def event(self, kind: str, data: dict[str, object]) -> None:
        """Append an event to the team's log, under the leader's epoch."""

    def tasks(self) -> list[Task]:
        """The register as of now."""

    def workers(self) -> dict[str, Member]:
        """Live members that take work."""

    def dispatch(self, task: Task, worker: str, data: AttemptData | None = None) -> bool:
        """Send a new attempt of a queued task to ``worker`` (False if it changed)."""

    def send(self, task: Task) -> None:
        """(Re)send the envelope of the task's current attempt to its assignee."""

    def review(self, task: Task) -> None:
        """Verify the result of a task in ``review`` and accept, retry or escalate it."""

    def retry(self, task: Task, status: str, failure: str) -> None:
        """A new attempt with ``failure`` in its history, or the inbox when out of tries."""

    def block(
        self, task: Task, reason: str, *, question: str | None = None, data: AttemptData | None = None
    ) -> None:
        """Send the task to a person (``blocked``)."""

    def fail(self, task: Task, reason: str, *, data: AttemptData | None = None) -> None:
        """Stop the task for good (``failed``, in the inbox)."""

    def finish(self, task: Task, reason: str) -> None:
        """Accept a task in ``review``: ``done``."""


class Leading(LeaderContext, Protocol):
    """What a leader gives its hooks' contexts: the ``LeaderContext``, with ``fail``
    told which hook stopped the task (for the log)."""

    def fail(
        self, task: Task, reason: str, *, data: AttemptData | None = None, by: str = ""
    ) -> None: ...


class HookContext:
    """The ``LeaderContext`` one hook receives: it hands on to the leader what the
    protocol lists and nothing else (no dispatcher, reviewer, hooks or view of it),
    and names the hook in what it logs for it (``fail``)."""

    __slots__ = ("__hook", "__leader")

    def __init__(self, leader: Leading, hook: str) -> None:
        self.__leader = leader
        self.__hook = hook

    @property
    def store(self) -> Store:
        return self.__leader.store

    @property
    def team(self) -> str:
        return self.__leader.team

    @property
    def me(self) -> str:
        return self.__leader.me

    @property
    def register(self) -> Register:
        return self.__leader.register

    @property
    def trust(self) -> Trust:
        return self.__leader.trust

    @property
    def workdir(self) -> Path | None:
        return self.__leader.workdir

    @property
    def credentials(self) -> Credentials | None:
        return self.__leader.credentials

    def epoch(self) -> int:
        return self.__leader.epoch()

    def now(self) -> float:
        return self.__leader.now()

    def event(self, kind: str, data: dict[str, object]) -> None:
        self.__leader.event(kind, data)

    def tasks(self) -> list[Task]:
        return self.__leader.tasks()

    def workers(self) -> dict[str, Member]:
        return self.__leader.workers()

    def dispatch(self, task: Task, worker: str, data: AttemptData | None = None) -> bool:
        return self.__leader.dispatch(task, worker, data)

    def send(self, task: Task) -> None:
        self.__leader.send(task)

    def review(self, task: Task) -> None:
        self.__leader.review(task)

    def retry(self, task: Task, status: str, failure: str) -> None:
        self.__leader.retry(task, status, failure)

    def block(
        self,
        task: Task,
        reason: str,
        *,
        question: str | None = None,
        data: AttemptData | None = None,
    ) -> None:
        self.__leader.block(task, reason, question=question, data=data)

    def fail(self, task: Task, reason: str, *, data: AttemptData | None = None) -> None:
        self.__leader.fail(task, reason, data=data, by=self.__hook)

    def finish(self, task: Task, reason: str) -> None:
        self.__leader.finish(task, reason)

    def __repr__(self) -> str:
        return f"HookContext({self.__hook!r})"


def hook_name(hook: LeaderHook) -> str:
    """How the log names ``hook``: its ``name``, or its class's when it kept the default."""
    return hook.name if hook.name != LeaderHook.name else type(hook).__name__


class LeaderHook:
    """A leader feature. Every point does nothing here; override the ones you need."""

    name: ClassVar[str] = "hook"
    options: ClassVar[frozenset[str]] = frozenset()  # task options (``options:``) it reads
    stageable: ClassVar[bool] = False
    """True when what this hook does at the dispatch and result points (``before_dispatch``,
    ``on_dispatch``, ``on_result``, ``before_review``, ``on_accept``, ``before_retry``)
    reaches nothing but the store: the leader may then hold those points' writes back
    and make them in one commit, and run them again should the commit be refused. A
    hook that merges, calls a model or runs a command there leaves it False."""

    def on_takeover(self, ctx: LeaderContext, task: Task) -> bool:
        """A new leader found ``task`` assigned: True if this hook takes care of it."""
        return False

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        """``task`` could be dispatched now: ``GO``, ``HOLD`` it, or ``Stop`` it."""
        return GO

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        """An attempt is about to go out: add to its data, budget or input."""

    def on_watch(self, ctx: LeaderContext, task: Task, now: float) -> Watch | None:
        """Supervising an assigned attempt: ``moved``, ``waiting``, or None (as usual)."""
        return None

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        """Once a round; True if it changed anything."""
        return False

    def on_result(self, ctx: LeaderContext, task: Task, result: TaskResult) -> str | None:
        """A result for the current attempt: a reason to refuse it, or None."""
        return None

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> Review | None:
        """About to verify ``result``: what this hook adds (or None)."""
        return None

    def on_accept(self, ctx: LeaderContext, task: Task, verdicts: list[Verdict]) -> bool:
        """The ladder passed: True if this hook finishes the task itself."""
        return False

    def before_retry(self, ctx: LeaderContext, task: Task, data: AttemptData) -> str | None:
        """A failure would queue a new attempt: a reason to stop the task instead."""
        return None

    def on_exhausted(
        self, ctx: LeaderContext, task: Task, failure: str, data: AttemptData
    ) -> bool:
        """``task`` used up its attempts: True if this hook took it from here."""
        return False

    def on_settled(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        """Nothing can move without a person: True if this hook acted (not finished yet)."""
        return False


def check_options(plan: Plan, known: frozenset[str], *, where: str = "") -> None:
    """Refuse a plan whose tasks name an option outside ``known`` (the options the hooks
    that will run it declare): one line naming the first such option (after ``where``,
    the path of a nested team's tasks)."""
    for index, task in enumerate(plan.tasks):
        unknown = sorted(set(task.options) - known)
        if unknown:
            raise ConfigError(
                f"{where}tasks[{index}].options.{unknown[0]}: no leader feature reads this option "
                f"(known: {', '.join(sorted(known)) or 'none'})"
            )


class Hooks:
    """Every hook, called in order; each point combines their answers. The leader
    passes itself; each hook gets its own ``HookContext`` of it instead."""

    def __init__(self, hooks: Sequence[LeaderHook] = ()) -> None:
        self.all = list(hooks)
        self._leader: Leading | None = None
        self._bound: list[tuple[LeaderHook, HookContext]] = []

    def options(self) -> frozenset[str]:
        return frozenset().union(*(h.options for h in self.all))

    @property
    def stageable(self) -> bool:
        """Every hook's dispatch and result points reach only the store (``LeaderHook``)."""
        return all(h.stageable for h in self.all)

    def check_options(self, plan: Plan) -> None:
        """Refuse a plan whose tasks name an option no hook reads (a typo, most likely)."""
        check_options(plan, self.options())

    def _each(self, leader: Leading) -> list[tuple[LeaderHook, HookContext]]:
        """Every hook with its context of ``leader`` (made once per leader)."""
        if self._leader is not leader or len(self._bound) != len(self.all):
            self._bound = [(h, HookContext(leader, hook_name(h))) for h in self.all]
            self._leader = leader
        return self._bound

    def on_takeover(self, leader: Leading, task: Task) -> bool:
        return any(h.on_takeover(ctx, task) for h, ctx in self._each(leader))

    def before_dispatch(self, leader: Leading, task: Task) -> Admission:
        for hook, ctx in self._each(leader):
            said = hook.before_dispatch(ctx, task)
            if isinstance(said, Stop):
                return replace(said, by=hook_name(hook))
            if said != GO:
                return said
        return GO

    def on_dispatch(self, leader: Leading, dispatch: Dispatch) -> None:
        for hook, ctx in self._each(leader):
            hook.on_dispatch(ctx, dispatch)

    def on_watch(self, leader: Leading, task: Task, now: float) -> Watch | None:
        for hook, ctx in self._each(leader):
            said = hook.on_watch(ctx, task, now)
            if said is not None:
                return said
        return None

    def on_tick(self, leader: Leading, tasks: list[Task]) -> bool:
        acted = False
        for hook, ctx in self._each(leader):
            acted |= hook.on_tick(ctx, tasks)
            if acted:
                tasks = leader.tasks()  # the next hook sees what this one changed
        return acted

    def on_result(self, leader: Leading, task: Task, result: TaskResult) -> str | None:
        for hook, ctx in self._each(leader):
            refused = hook.on_result(ctx, task, result)
            if refused:
                return refused
        return None

    def before_review(self, leader: Leading, task: Task, result: TaskResult) -> Review:
        merged = Review()
        for hook, ctx in self._each(leader):
            said = hook.before_review(ctx, task, result)
            if said is None:
                continue
            if said.decided:
                said.after = [*merged.after, *said.after]
                return said
            merged.after += said.after
            merged.verdicts += said.verdicts
            merged.workdir = said.workdir or merged.workdir
            merged.quorum = said.quorum or merged.quorum
            merged.from_rung = said.from_rung or merged.from_rung
        return merged

    def on_accept(self, leader: Leading, task: Task, verdicts: list[Verdict]) -> bool:
        return any(h.on_accept(ctx, task, verdicts) for h, ctx in self._each(leader))

    def before_retry(self, leader: Leading, task: Task, data: AttemptData) -> Stop | None:
        """The first hook's reason to stop the task instead of a retry, as a ``Stop``."""
        for hook, ctx in self._each(leader):
            reason = hook.before_retry(ctx, task, data)
            if reason:
                return Stop(reason, by=hook_name(hook))
        return None

    def on_exhausted(self, leader: Leading, task: Task, failure: str, data: AttemptData) -> bool:
        return any(h.on_exhausted(ctx, task, failure, data) for h, ctx in self._each(leader))

    def on_settled(self, leader: Leading, tasks: list[Task]) -> bool:
        acted = False
        for hook, ctx in self._each(leader):
            acted |= hook.on_settled(ctx, tasks)
        return acted


IN_STORE_CHECKS = frozenset({"schema", "evidence"})
"""Check kinds whose verdict is reached on the spot, running nothing (no command, model
or vote)."""


def judged_in_store(task: Task, hooks: Hooks) -> bool:
    """Judging a result of ``task`` writes to the store and does nothing else, and does
    it at once: every hook says so (``LeaderHook.stageable``), its checks run nothing,
    and it is not its last attempt (running out may split it, with a model). Only such a
    judgement may be held back and made in one commit with the result's record: one
    that runs a command or asks a model must find the result recorded first, should
    its judge die meanwhile."""
    return (
        hooks.stageable
        and task.used_attempts < task.spec.max_attempts
        and all(check.kind in IN_STORE_CHECKS for check in task.spec.checks)
    )
