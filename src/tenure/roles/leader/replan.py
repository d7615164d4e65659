"""Goal shift for every team: a new plan applied once, by whoever holds the team's lease.

The rules, the same for team, local, queue, nested and coding teams:

- a task the new plan adds is registered; an unstarted one (queued, or waiting for a
  person) is re-derived from it: new goal, checks, dependencies and options, fresh
  attempts (attempt numbers never go back, so idempotency keys stay unique);
- a task the new plan drops is cancelled with the reason;
- a running task (dropped or changed) is cancelled with the reason
  (``cancel_running``), or let finish: its result is recorded, and then a dropped task is
  cancelled, never accepted, and a changed one runs again under its new definition;
- a finished task stays finished (its new definition, if any, is noted, not applied).

The change is applied in one round of the leader, before it dispatches anything, so no
attempt is sent under half a plan; what a running task becomes is kept in its data
(``hooks["replan"]``) and ``ReplanHook`` carries it out when its attempt ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from tenure.coord import LEAD, Credentials, SignatureRefused
from tenure.protocol import Plan, PlanTask, TaskResult, idempotency_key, to_dict
from tenure.protocol.codec import translate
from tenure.protocol.envelope import PriorAttempt, Signature
from tenure.protocol.errors import ConfigError, Conflict, ProtocolError
from tenure.protocol.messages import PlanUpdate
from tenure.protocol.taskspec import AttemptData, TaskSpec, spec_for
from tenure.roles.leader.hooks import GO, HOLD, Admission, LeaderContext, LeaderHook
from tenure.roles.register import Register, Task
from tenure.roles.register.revision import PlanRequest, Revision, plan_digest, record_revision
from tenure.roles.register.spend import log_attempt
from tenure.store import TERMINAL_STATES, Store

__all__ = [
    "CANCEL_RUNNING",
    "LET_FINISH",
    "MARK",
    "PLAN_REQUEST",
    "PLAN_UPDATE",
    "ReplanContext",
    "ReplanMark",
    "ReplanHook",
    "apply_plan",
    "dropped_by_replan",
    "plan_changes",
    "take_request",
    "update_event",
]

MARK = "replan"
LET_FINISH = "let running finish"
CANCEL_RUNNING = "cancel running"
PLAN_UPDATE = "plan.update"
REASON_LIMIT = 300
APPLY_TRIES = 5


class ReplanMark(BaseModel):
    """What a replan decided for a task, kept in its data under ``hooks["replan"]``:
    ``drop`` (why) or ``spec`` (its new definition) for a task whose running attempt
    ends first; ``dropped`` for a task it cancelled (no longer part of the plan)."""

    model_config = ConfigDict(extra="forbid")

    drop: str | None = None
    spec: TaskSpec | None = None
    dropped: bool = False

    @classmethod
    def of(cls, data: AttemptData) -> ReplanMark | None:
        """The mark in ``data``, or None (none, or not one a replan wrote: ignored)."""
        raw = data.hooks.get(MARK)
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None

    def into(self, data: AttemptData) -> AttemptData:
        mark = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return data.with_(hooks={**data.hooks, MARK: mark})


def _unmarked(data: AttemptData) -> dict[str, Any]:
    """The hooks' state in ``data`` without a replan's mark."""
    return {k: v for k, v in data.hooks.items() if k != MARK}


class ReplanContext(Protocol):
    """What applying a plan needs: the register, fenced, and the event log."""

    @property
    def store(self) -> Store: ...
    @property
    def team(self) -> str: ...
    @property
    def me(self) -> str: ...
    @property
    def register(self) -> Register: ...
    def epoch(self) -> int: ...
    def now(self) -> float: ...
    def event(self, kind: str, data: dict[str, Any]) -> None: ...


@dataclass
class Changes:
    """How a new plan differs from the register."""

    added: list[PlanTask] = field(default_factory=list)
    dropped: list[Task] = field(default_factory=list)
    changed: list[tuple[Task, TaskSpec]] = field(default_factory=list)
    restated: list[tuple[Task, TaskSpec]] = field(default_factory=list)  # team-wide fields only
    kept: list[Task] = field(default_factory=list)  # as it was, but a replan had decided it
    same: list[Task] = field(default_factory=list)  # as it was


def _bare(spec: TaskSpec) -> TaskSpec:
    return spec.model_copy(update={"signature": None})


def plan_changes(tasks: Iterable[Task], plan: Plan) -> Changes:
    """Compare the register's planned tasks (not quorum voters or split parts) with ``plan``."""
    planned = {t.task_id: t for t in tasks if not t.spec.replica_of and not t.spec.split_of}
    changes = Changes()
    for entry in plan.tasks:
        task = planned.pop(entry.id, None)
        spec = spec_for(plan, entry)
        if task is None:
            changes.added.append(entry)
        elif task.problem is None and task.spec.plan_task() != spec.plan_task():
            changes.changed.append((task, spec))
        elif _decided(task) is not None:
            changes.kept.append(task)
        elif task.problem is not None or _bare(task.spec) != spec:
            changes.restated.append((task, spec))
        else:
            changes.same.append(task)
    changes.dropped = list(planned.values())
    return changes


def _running(task: Task) -> bool:
    return task.state in ("running", "review") or (task.state == "queued" and bool(task.assignee))


def apply_plan(
    ctx: ReplanContext,
    plan: Plan,
    *,
    revision: int,
    reason: str,
    cancel_running: bool,
    by: str,
) -> Revision:
    """Apply ``plan`` to the register as revision ``revision``; log it and record it.
    Each step is idempotent against the register, so a step that lost a race with a
    worker (``Conflict``) is retried by applying the whole plan again to what is there."""
    why = f"replanned (revision {revision})" + (f": {reason}" if reason else "")
    changes = plan_changes(ctx.register.tasks(), plan)  # the changelog: what was asked
    notes: list[str] = []
    for tries in range(APPLY_TRIES):
        try:
            notes += _apply(ctx, plan, why, cancel_running)
            break
        except Conflict:
            if tries == APPLY_TRIES - 1:
                raise
    entry = Revision(
        revision=revision,
        digest=plan_digest(plan),
        reason=reason,
        by=by,
        applied_by=ctx.me,
        at=ctx.now(),
        mode=CANCEL_RUNNING if cancel_running else LET_FINISH,
        added=[t.id for t in changes.added],
        dropped=[t.task_id for t in changes.dropped],
        changed=[t.task_id for t, _ in changes.changed],
        notes=list(dict.fromkeys(n for n in notes if n)),
    )
    ctx.event(PLAN_UPDATE, update_event(entry, plan))
    record_revision(ctx.store, ctx.team, entry, epoch=ctx.epoch())
    return entry


def _apply(ctx: ReplanContext, plan: Plan, why: str, cancel_running: bool) -> list[str]:
    """One pass of the rules over the register as it is now; one note per change."""
    tasks = ctx.register.tasks()
    changes = plan_changes(tasks, plan)
    notes: list[str] = []
    for new in changes.added:
        try:
            ctx.register.create(new.id, spec_for(plan, new))
        except Conflict:
            continue  # registered a moment ago (a re-applied revision)
        notes.append(f"{new.id}: added")
    for task in changes.dropped:
        notes.append(_drop(ctx, task, why, cancel_running))
    for task, spec in changes.changed:
        notes.append(_respec(ctx, task, spec, why, cancel_running))
    for task, spec in changes.restated:
        if _running(task) and cancel_running:
            notes.append(_restart(ctx, task, spec, why))
        elif task.state not in TERMINAL_STATES and not _running(task):
            ctx.register.move(task, task.state, spec=spec)
    for task in changes.same:
        if _running(task) and cancel_running:
            notes.append(_restart(ctx, task, task.spec, why))
    for task in changes.kept:  # an earlier replan's decision the new plan takes back
        ctx.register.move(task, task.state, data=task.data.with_(hooks=_unmarked(task.data)))
        notes.append(f"{task.task_id}: kept after all")
    gone = {t.task_id for t in changes.dropped} | {t.task_id for t, _ in changes.changed}
    _cancel_derived(ctx, tasks, gone, why)
    return notes


def update_event(entry: Revision, plan: Plan) -> dict[str, Any]:
    """The ``plan.update`` event: a ``PlanUpdate`` body (the revision, why, the tasks as
    they now stand) with the changelog entry's who, when and what changed."""
    body = PlanUpdate(revision=entry.revision, reason=entry.reason, tasks=plan.tasks)
    return {**entry.model_dump(mode="json"), **body.model_dump(mode="json", by_alias=True)}


def _drop(ctx: ReplanContext, task: Task, why: str, cancel_running: bool) -> str:
    if task.state in TERMINAL_STATES:
        return f"{task.task_id}: not in the new plan; stays {task.state}"
    if _running(task) and not cancel_running and task.state != "review":
        _mark(ctx, task, ReplanMark(drop=why))
        return f"{task.task_id}: dropped; running: its result is recorded, never accepted"
    ctx.register.move(task, "cancelled", reason=why[:REASON_LIMIT], data=_dropped(task.data))
    return f"{task.task_id}: dropped" + (" (its running attempt cancelled)" if _running(task) else "")


def _dropped(data: AttemptData) -> AttemptData:
    """The data of a task a replan cancelled: no longer part of the plan."""
    return ReplanMark(dropped=True).into(data).with_(dispatched_at=None)


def dropped_by_replan(task: Task) -> bool:
    """True for a task cancelled because a replan left it out (not a failure of its team)."""
    if task.state != "cancelled":
        return False
    mark = ReplanMark.of(task.data)
    return mark is not None and mark.dropped


def _respec(ctx: ReplanContext, task: Task, spec: TaskSpec, why: str, cancel_running: bool) -> str:
    if task.state in TERMINAL_STATES:
        return f"{task.task_id}: already {task.state}; its new definition is not applied"
    if _running(task) and not cancel_running and task.state != "review":
        _mark(ctx, task, ReplanMark(spec=spec))
        return f"{task.task_id}: changed; running: it runs again with the new definition"
    was = task.state
    requeue(ctx.register, task, spec, why)
    return f"{task.task_id}: changed" + (f" (re-derived from {was})" if was != "queued" else "")


def _restart(ctx: ReplanContext, task: Task, spec: TaskSpec, why: str) -> str:
    """``--cancel-running`` on a task the new plan keeps: its attempt is stopped, and it
    runs again, without spending an attempt of its allowance."""
    prior = PriorAttempt(attempt=max(task.attempt, 1), status="cancelled", failure=why)
    data = task.data.with_(
        history=[*task.data.history, prior], dispatched_at=None, attempt_base=task.attempt
    )
    ctx.register.move(task, "queued", spec=spec, data=data, assignee=None, reason=why[:REASON_LIMIT])
    return f"{task.task_id}: its running attempt cancelled; it runs again"


def requeue(
    register: Register,
    task: Task,
    spec: TaskSpec,
    why: str,
    *,
    data: AttemptData | None = None,
    history: list[PriorAttempt] | None = None,
    **fields: Any,
) -> Task:
    """``task`` queued again under ``spec``: unassigned, with a fresh allowance of attempts
    and no history of its old definition's failures (but ``history``, if given)."""
    data = (data or task.data).with_(
        attempt_base=task.attempt,
        question=None,
        history=history or [],
        dispatched_at=None,
        split_into=[],
        quorum=None,
        hooks=_unmarked(task.data),
    )
    return register.move(
        task, "queued", spec=spec, data=data, assignee=None, reason=why[:REASON_LIMIT], **fields
    )


def _mark(ctx: ReplanContext, task: Task, mark: ReplanMark) -> None:
    ctx.register.move(task, task.state, data=mark.into(task.data))


def _cancel_derived(ctx: ReplanContext, tasks: list[Task], gone: set[str], why: str) -> None:
    """Quorum voters and split parts of a dropped or changed task go with it."""
    for task in tasks:
        origin = task.spec.replica_of or task.spec.split_of
        if origin in gone and task.state not in TERMINAL_STATES:
            try:
                current = ctx.register.get(task.task_id)
                ctx.register.move(
                    current, "cancelled", reason=why[:REASON_LIMIT], data=_dropped(current.data)
                )
            except Conflict:
                continue


def _decided(task: Task) -> ReplanMark | None:
    """What a replan decided for this task once its running attempt ends, if anything."""
    if task.state in TERMINAL_STATES:
        return None
    mark = ReplanMark.of(task.data)
    if mark is None or (mark.drop is None and mark.spec is None):
        return None
    return mark


class ReplanHook(LeaderHook):
    """Carries out what a replan decided for a task that was running: once its attempt
    ends, a dropped task is cancelled (its result recorded, never accepted) and a changed
    one is queued again under its new definition."""

    stageable: ClassVar[bool] = True  # dispatch and result points: the store only

    name: ClassVar[str] = MARK

    def before_dispatch(self, ctx: LeaderContext, task: Task) -> Admission:
        return HOLD if _decided(task) is not None else GO

    def on_result(self, ctx: LeaderContext, task: Task, result: TaskResult) -> str | None:
        mark = _decided(task)
        current = idempotency_key(task.task_id, task.attempt)
        if mark is None or result.idempotency_key != current:
            return None
        started = task.data.dispatched_at or task.updated_at
        data = log_attempt(task.data, task.attempt, result.usage, ctx.now() - started, task.assignee)
        self._settle(ctx, task, data, mark, to_dict(result))
        return "the replan decided this task: its result is recorded, not reviewed"

    def on_tick(self, ctx: LeaderContext, tasks: list[Task]) -> bool:
        acted = False
        for task in tasks:
            mark = _decided(task)
            if mark is None or _running(task):
                continue
            self._settle(ctx, task, task.data, mark, None)  # its attempt ended without a result
            acted = True
        return acted

    def _settle(
        self,
        ctx: LeaderContext,
        task: Task,
        data: AttemptData,
        mark: ReplanMark,
        result: dict[str, Any] | None,
    ) -> None:
        fields: dict[str, Any] = {} if result is None else {"result": result}
        try:
            if mark.drop is not None:
                reason = mark.drop[:REASON_LIMIT]
                ctx.register.move(task, "cancelled", reason=reason, data=_dropped(data), **fields)
                ctx.event("replan.dropped", {"task_id": task.task_id, "recorded": result is not None})
                return
            assert mark.spec is not None  # a decided task's mark has one or the other
            spec = mark.spec
            prior = PriorAttempt(
                attempt=max(task.attempt, 1),
                status="replanned",
                failure="finished under the plan's previous definition",
            )
            why = "re-derived by a replan"
            requeue(ctx.register, task, spec, why, data=data, history=[prior], **fields)
            ctx.event("replan.requeued", {"task_id": task.task_id, "recorded": result is not None})
        except Conflict:
            return  # changed under us: the next round sees it


PLAN_REQUEST = "plan.request"  # what the lead key signs of a replan request


def take_request(
    ctx: ReplanContext,
    request: PlanRequest,
    *,
    credentials: Credentials | None,
    check: Callable[[Plan], None],
) -> Revision:
    """Apply a replan request, or record why it is refused (a bad plan, a forged or
    unsigned request in a signed team): either way the revision is settled once."""
    try:
        if credentials is not None:
            signature = Signature.model_validate(request.signature or {})
            credentials.verify(PLAN_REQUEST, request.body(), signature, by=LEAD)
        plan = Plan.model_validate(request.plan)
        if plan.team != ctx.team:
            raise ConfigError(f"team: the new plan is for {plan.team!r}, not {ctx.team!r}")
        check(plan)
    except (SignatureRefused, ValidationError, ProtocolError, ConfigError) as exc:
        why = str(translate(exc) if isinstance(exc, ValidationError) else exc)
        refused = Revision(
            revision=request.revision,
            digest="",
            reason=request.reason,
            by=request.by,
            applied_by=ctx.me,
            at=ctx.now(),
            refused=why[:REASON_LIMIT],
        )
        kind = "security.replan_refused" if isinstance(exc, SignatureRefused) else "replan.refused"
        ctx.event(kind, {"revision": request.revision, "reason": refused.refused})
        record_revision(ctx.store, ctx.team, refused, epoch=ctx.epoch())
        return refused
    return apply_plan(
        ctx,
        plan,
        revision=request.revision,
        reason=request.reason,
        cancel_running=request.cancel_running,
        by=request.by,
    )
