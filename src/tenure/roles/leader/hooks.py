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

A hook receives the ``LeaderContext`` (what a leader may do, nothing of how it
does it) and the typed ``Task``; it never reaches into the conductor. A hook
declares the task ``options`` it understands: a plan naming an option no hook
declared is refused when it loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    "Hooks",
    "LeaderContext",
    "LeaderHook",
    "Review",
    "Stop",
    "Watch",
]


@dataclass(frozen=True)
class Stop:
    """Stop the task for good (``failed``, in the inbox) with this reason."""

    reason: str


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


class LeaderHook:
    """A leader feature. Every point does nothing here; override the ones you need."""

    name: ClassVar[str] = "hook"
    options: ClassVar[frozenset[str]] = frozenset()  # task options (``options:``) it reads

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


class Hooks:
    """Every hook, called in order; each point combines their answers."""

    def __init__(self, hooks: Sequence[LeaderHook] = ()) -> None:
        self.all = list(hooks)

    def options(self) -> frozenset[str]:
        return frozenset().union(*(h.options for h in self.all))

    def check_options(self, plan: Plan) -> None:
        """Refuse a plan whose tasks name an option no hook reads (a typo, most likely)."""
        known = self.options()
        for index, task in enumerate(plan.tasks):
            unknown = sorted(set(task.options) - known)
            if unknown:
                raise ConfigError(
                    f"tasks[{index}].options.{unknown[0]}: no leader feature reads this option "
                    f"(known: {', '.join(sorted(known)) or 'none'})"
                )

    def on_takeover(self, ctx: LeaderContext, task: Task) -> bool:
        return any(h.on_takeover(ctx, task) for h in self.all)

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        for hook in self.all:
            said = hook.before_dispatch(ctx, task)
            if said != GO:
                return said
        return GO

    def on_dispatch(self, ctx: LeaderContext, dispatch: Dispatch) -> None:
        for hook in self.all:
            hook.on_dispatch(ctx, dispatch)

    def on_watch(self, ctx: LeaderContext, task: Task, now: float) -> Watch | None:
        for hook in self.all:
            said = hook.on_watch(ctx, task, now)
            if said is not None:
                return said
        return None

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        acted = False
        for hook in self.all:
            acted |= hook.on_tick(ctx, tasks)
            if acted:
                tasks = ctx.tasks()  # the next hook sees what this one changed
        return acted

    def on_result(self, ctx: LeaderContext, task: Task, result: TaskResult) -> str | None:
        for hook in self.all:
            refused = hook.on_result(ctx, task, result)
            if refused:
                return refused
        return None

    def before_review(self, ctx: LeaderContext, task: Task, result: TaskResult) -> Review:
        merged = Review()
        for hook in self.all:
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

    def on_accept(self, ctx: LeaderContext, task: Task, verdicts: list[Verdict]) -> bool:
        return any(h.on_accept(ctx, task, verdicts) for h in self.all)

    def before_retry(self, ctx: LeaderContext, task: Task, data: AttemptData) -> str | None:
        for hook in self.all:
            stop = hook.before_retry(ctx, task, data)
            if stop:
                return stop
        return None

    def on_exhausted(
        self, ctx: LeaderContext, task: Task, failure: str, data: AttemptData
    ) -> bool:
        return any(h.on_exhausted(ctx, task, failure, data) for h in self.all)

    def on_settled(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        acted = False
        for hook in self.all:
            acted |= hook.on_settled(ctx, tasks)
        return acted
