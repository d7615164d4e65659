"""Stateful property tests: random sequences of store calls against a model.

Each machine opens two handles on the store under test (two "members") and uses
a fresh team per example, so it works on any backend without wiping it. Time is
modelled honestly: every call is bracketed by the local monotonic clock, so an
item with a TTL is known to be live, known to be expired, or "unknown" while
its expiry instant lies inside a call's window; for unknown items either
outcome is accepted, and a ``tick`` rule sleeps past the short TTL so expiries
really happen.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from conftest import LEASE_TOKEN
from tenure.protocol.errors import Conflict, EffectInProgress, LeaseLost, NotFound, StaleEpoch
from tenure.store import ALLOWED_TRANSITIONS, TASK_STATES, Store, TaskRecord, TaskState, open_store

SHORT = 0.02
LONG = 60.0
MARGIN = 0.01
MAX_DELIVERIES = 2

SETTINGS = settings(
    max_examples=50,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
MESSAGE_SETTINGS = settings(SETTINGS, max_examples=60)

T = TypeVar("T")
Status = Literal["live", "expired", "unknown"]


@dataclass
class Window:
    """Where (local monotonic time) an expiry instant must lie."""

    lo: float
    hi: float

    @classmethod
    def after(cls, started: float, ended: float, ttl: float) -> Window:
        return cls(started + ttl - MARGIN, ended + ttl + MARGIN)

    def status(self, started: float, ended: float) -> Status:
        """Whether the item was live during a call that ran from ``started`` to ``ended``."""
        if ended < self.lo:
            return "live"
        if started > self.hi:
            return "expired"
        return "unknown"


@dataclass
class Outcome:
    value: Any
    error: Exception | None
    started: float
    ended: float


def timed(call: Callable[[], T]) -> Outcome:
    started = time.monotonic()
    try:
        value: Any = call()
        error = None
    except (Conflict, EffectInProgress, LeaseLost, NotFound, StaleEpoch) as exc:
        value, error = None, exc
    return Outcome(value, error, started, time.monotonic())


class TwoHandles(RuleBasedStateMachine):
    """Base: two store handles on one URL, a fresh team, an event-order check."""

    url = ""

    def __init__(self) -> None:
        super().__init__()
        self.handles: list[Store] = [open_store(self.url), open_store(self.url)]
        self.team = f"prop-{uuid.uuid4().hex[:12]}"
        self.seen_seq = 0

    def teardown(self) -> None:
        for handle in self.handles:
            handle.close()

    def windows(self) -> list[Window]:
        """Every expiry the model is waiting on."""
        return []

    @rule()
    def tick(self) -> None:
        """Let every pending short TTL pass (sleeping only when one is pending)."""
        now = time.monotonic()
        pending = [w.hi for w in self.windows() if now <= w.hi < now + 1.0]
        if pending:
            time.sleep(max(pending) - now + 0.001)
            event("ticked")

    @invariant()
    def events_are_ordered(self) -> None:
        fresh = self.handles[0].events(self.team, after=self.seen_seq)
        seqs = [event.seq for event in fresh]
        assert all(seq > self.seen_seq for seq in seqs)
        assert seqs == sorted(set(seqs)), f"event seqs out of order: {seqs}"
        if seqs:
            self.seen_seq = seqs[-1]


# --- leases, members, register, effects ---------------------------------------------------

HOLDERS = ["h1", "h2", "h3"]
MEMBERS = ["m1", "m2"]
TASKS = ["t1", "t2", "t3"]
KEYS = ["k1", "k2"]
WORKERS = ["w1", "w2"]


@dataclass
class ModelLease:
    holder: str
    epoch: int
    window: Window


@dataclass
class ModelEffect:
    status: Literal["running", "done"]
    holder: str
    window: Window | None = None
    result: Any = None


@dataclass
class Ledger:
    runs: dict[str, list[str]] = field(default_factory=dict)


class CoordinationMachine(TwoHandles):
    def __init__(self) -> None:
        super().__init__()
        self.counter = 0
        self.lease: ModelLease | None = None
        self.granted: dict[int, str] = {}
        self.members: dict[str, int] = {}
        self.tasks: dict[str, TaskRecord] = {}
        self.effects: dict[str, ModelEffect] = {}
        self.ledger = Ledger()
        self.results = itertools.count(1)

    # helpers

    def windows(self) -> list[Window]:
        found = [e.window for e in self.effects.values() if e.window is not None]
        return found + ([self.lease.window] if self.lease is not None else [])

    def lease_status(self, started: float, ended: float) -> Status | None:
        return None if self.lease is None else self.lease.window.status(started, ended)

    def epoch_for(self, which: str, back: int) -> int:
        """The current epoch, or one ``back`` below it (stale) when there is one."""
        if which == "stale" and self.counter >= 1:
            return max(0, self.counter - back)
        return self.counter

    def is_stale(self, epoch: int) -> bool:
        return epoch < self.counter

    # leases

    @initialize(holder=st.sampled_from(HOLDERS), short=st.booleans())
    def first_leader(self, holder: str, short: bool) -> None:
        self.claim(0, holder, short, 0)

    @rule(
        handle=st.integers(0, 1),
        holder=st.sampled_from(HOLDERS),
        short=st.booleans(),
        at_least=st.one_of(st.just(0), st.integers(0, 12)),
    )
    def claim(self, handle: int, holder: str, short: bool, at_least: int) -> None:
        ttl = SHORT if short else LONG
        expected = max(self.counter, at_least, max(self.members.values(), default=0)) + 1
        out = timed(
            lambda: self.handles[handle].claim_lease(
                self.team, holder, ttl, at_least=at_least, token=LEASE_TOKEN
            )
        )
        status = self.lease_status(out.started, out.ended)
        if out.error is not None:
            assert isinstance(out.error, Conflict), out.error
            assert status in ("live", "unknown"), "claim refused while the lease was vacant"
            event("claim refused")
            return
        lease = out.value
        same_holder = self.lease is not None and self.lease.holder == holder
        assert status in (None, "expired", "unknown") or same_holder, "claimed a live lease"
        assert lease.holder == holder
        assert lease.epoch == expected, f"epoch {lease.epoch}, expected {expected}"
        assert lease.epoch not in self.granted, f"epoch {lease.epoch} granted twice"
        assert all(lease.epoch > epoch for epoch in self.granted), "epoch went backwards"
        self.granted[lease.epoch] = holder
        event(f"claim granted over a {status or 'vacant'} lease")
        self.counter = lease.epoch
        self.lease = ModelLease(holder, lease.epoch, Window.after(out.started, out.ended, ttl))

    def holder_and_epoch(self, pick: int, holder: str, delta: int) -> tuple[str, int]:
        """Mostly the model lease's own holder and epoch; sometimes a wrong one."""
        if self.lease is not None and pick > 0:
            return self.lease.holder, self.lease.epoch
        return holder, self.counter + delta

    @rule(
        handle=st.integers(0, 1),
        short=st.booleans(),
        pick=st.integers(0, 3),
        holder=st.sampled_from(HOLDERS),
        delta=st.integers(-1, 1),
    )
    def renew(self, handle: int, short: bool, pick: int, holder: str, delta: int) -> None:
        ttl = SHORT if short else LONG
        holder, epoch = self.holder_and_epoch(pick, holder, delta)
        held = self.lease is not None and (self.lease.holder, self.lease.epoch) == (holder, epoch)
        out = timed(
            lambda: self.handles[handle].renew_lease(
                self.team, holder, epoch, ttl, token=LEASE_TOKEN
            )
        )
        status = self.lease_status(out.started, out.ended)
        if out.error is not None:
            assert isinstance(out.error, LeaseLost), out.error
            assert not held or status != "live", "renew of a live held lease refused"
            event("renew refused")
            return
        assert held and status != "expired", "renewed a lease not held"
        assert (out.value.holder, out.value.epoch) == (holder, epoch)
        assert self.lease is not None
        self.lease.window = Window.after(out.started, out.ended, ttl)
        event("renew granted")

    @rule(
        handle=st.integers(0, 1),
        pick=st.integers(0, 3),
        holder=st.sampled_from(HOLDERS),
        delta=st.integers(-1, 1),
    )
    def release(self, handle: int, pick: int, holder: str, delta: int) -> None:
        holder, epoch = self.holder_and_epoch(pick, holder, delta)
        held = self.lease is not None and (self.lease.holder, self.lease.epoch) == (holder, epoch)
        out = timed(
            lambda: self.handles[handle].release_lease(self.team, holder, epoch, token=LEASE_TOKEN)
        )
        status = self.lease_status(out.started, out.ended)
        if out.value:
            assert held, "released a lease not held"
            self.lease = None
            event("release done")
        else:
            assert not held or status != "live", "release of a live held lease refused"
            event("release refused")

    # members

    @rule(member=st.sampled_from(MEMBERS), highest=st.integers(0, 15))
    def join(self, member: str, highest: int) -> None:
        if member in self.members:
            return  # rejoining with a lower epoch is not pinned down by the contract
        joined = self.handles[0].join(self.team, member, ttl=LONG, highest_epoch=highest)
        assert joined.highest_epoch == highest
        self.members[member] = highest

    @rule(member=st.sampled_from(MEMBERS), highest=st.integers(0, 15))
    def heartbeat(self, member: str, highest: int) -> None:
        out = timed(
            lambda: self.handles[1].heartbeat(self.team, member, ttl=LONG, highest_epoch=highest)
        )
        if member not in self.members:
            assert isinstance(out.error, NotFound), out.error
            return
        assert out.error is None, out.error
        self.members[member] = max(self.members[member], highest)
        assert out.value.highest_epoch == self.members[member], "highest epoch went down"

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self.handles[0].leave(self.team, member)
        self.members.pop(member, None)

    # register

    @rule(
        handle=st.integers(0, 1),
        task_id=st.sampled_from(TASKS),
        which=st.sampled_from(["current", "current", "stale"]),
        back=st.integers(1, 3),
        state=st.sampled_from(["queued", "queued", "blocked"]),
    )
    def create(self, handle: int, task_id: str, which: str, back: int, state: TaskState) -> None:
        epoch = self.epoch_for(which, back)
        before = self.snapshot(task_id)
        out = timed(
            lambda: self.handles[handle].create_task(
                self.team, task_id, epoch=epoch, spec={"id": task_id}, state=state
            )
        )
        allowed: set[type[Exception]] = set()
        if self.is_stale(epoch):
            allowed.add(StaleEpoch)
        if task_id in self.tasks:
            allowed.add(Conflict)
        if not allowed:
            assert out.error is None, out.error
            record = out.value
            assert (record.state, record.epoch, record.spec) == (state, epoch, {"id": task_id})
            self.tasks[task_id] = record
            event("create done")
            return
        assert out.error is not None, f"create at epoch {epoch} (current {self.counter}) accepted"
        assert type(out.error) in allowed, out.error
        event(f"create refused: {type(out.error).__name__}")
        assert self.snapshot(task_id) == before, "a refused create changed the task"

    @rule(
        handle=st.integers(0, 1),
        which=st.sampled_from(["current", "current", "current", "stale"]),
        back=st.integers(1, 3),
        assignee=st.one_of(st.none(), st.sampled_from(WORKERS)),
        set_assignee=st.booleans(),
        known=st.integers(0, 7),
        index=st.integers(0, 63),
        other_task=st.sampled_from([*TASKS, "t-missing"]),
        plausible=st.integers(0, 3),
        to_index=st.integers(0, 63),
        more_expected=st.frozensets(st.sampled_from(TASK_STATES), max_size=2),
        any_to=st.sampled_from(TASK_STATES),
        any_expected=st.frozensets(st.sampled_from(TASK_STATES), min_size=1, max_size=3),
        version=st.sampled_from(["none", "current", "current", "old"]),
    )
    def transition(
        self,
        handle: int,
        which: str,
        back: int,
        assignee: str | None,
        set_assignee: bool,
        known: int,
        index: int,
        other_task: str,
        plausible: int,
        to_index: int,
        more_expected: frozenset[TaskState],
        any_to: TaskState,
        any_expected: frozenset[TaskState],
        version: str,
    ) -> None:
        # Every rule draws the same shape of data whatever the model holds (the
        # model depends on timing, and Hypothesis needs replayable draws).
        epoch = self.epoch_for(which, back)
        task_ids = sorted(self.tasks)
        task_id = task_ids[index % len(task_ids)] if task_ids and known > 0 else other_task
        current = self.tasks.get(task_id)
        # Mostly a move the register should accept; sometimes any move at all.
        to: TaskState
        if current is not None and plausible > 0:
            allowed_to = sorted(ALLOWED_TRANSITIONS[current.state]) or [any_to]
            to = allowed_to[to_index % len(allowed_to)]
            expect = {current.state} | more_expected
        else:
            to, expect = any_to, set(any_expected)
        wanted: int | None = None
        if version != "none":
            base = current.version if current is not None else 1
            wanted = base if version == "current" else base - 1
        extra: dict[str, Any] = {"assignee": assignee} if set_assignee else {}
        before = self.snapshot(task_id)
        out = timed(
            lambda: self.handles[handle].transition(
                self.team,
                task_id,
                epoch=epoch,
                expect=expect,
                to=to,
                version=wanted,
                data={"n": epoch},
                **extra,
            )
        )
        allowed: set[type[Exception]] = set()
        if self.is_stale(epoch):
            allowed.add(StaleEpoch)
        if current is None:
            allowed.add(NotFound)
        elif (
            current.state not in expect
            or (wanted is not None and wanted != current.version)
            or to not in ALLOWED_TRANSITIONS[current.state]
        ):
            allowed.add(Conflict)
        if allowed:
            assert out.error is not None, f"transition should have been refused ({allowed})"
            assert type(out.error) in allowed, out.error
            assert self.snapshot(task_id) == before, "a refused transition changed the task"
            event(f"transition refused: {type(out.error).__name__}")
            return
        assert out.error is None, out.error
        assert current is not None
        record = out.value
        assert record.state == to
        assert record.version > current.version
        assert record.data == {"n": epoch}
        assert record.assignee == (assignee if set_assignee else current.assignee)
        assert (record.spec, record.attempt, record.result, record.reason) == (
            current.spec,
            current.attempt,
            current.result,
            current.reason,
        )
        self.tasks[task_id] = record
        event("transition applied")

    @rule(index=st.integers(0, 63), to_index=st.integers(0, 63), handle=st.integers(0, 1))
    def advance(self, index: int, to_index: int, handle: int) -> None:
        """The leader's everyday move: an allowed step at the current epoch and version."""
        self.transition(
            handle=handle,
            which="current",
            back=1,
            assignee=None,
            set_assignee=False,
            known=1,
            index=index,
            other_task="t-missing",
            plausible=1,
            to_index=to_index,
            more_expected=frozenset(),
            any_to="queued",
            any_expected=frozenset({"queued"}),
            version="current",
        )

    def snapshot(self, task_id: str) -> TaskRecord | None:
        try:
            return self.handles[0].get_task(self.team, task_id)
        except NotFound:
            return None

    # effects

    @rule(
        handle=st.integers(0, 1),
        key=st.sampled_from(KEYS),
        holder=st.sampled_from(WORKERS),
        short=st.booleans(),
        which=st.sampled_from(["current", "current", "stale"]),
        back=st.integers(1, 3),
    )
    def effect_begin(
        self, handle: int, key: str, holder: str, short: bool, which: str, back: int
    ) -> None:
        epoch = self.epoch_for(which, back)
        seconds = SHORT if short else LONG
        out = timed(
            lambda: self.handles[handle].effect_begin(
                self.team, key, epoch=epoch, holder=holder, claim_seconds=seconds
            )
        )
        effect = self.effects.get(key)
        if self.is_stale(epoch):
            assert isinstance(out.error, StaleEpoch), f"stale effect_begin gave {out}"
            event("effect refused: stale")
            return
        if effect is not None and effect.status == "done":
            assert out.error is None, out.error
            assert (out.value.status, out.value.result) == ("done", effect.result)
            event("effect already done")
            return
        claim: Status | None = None
        if effect is not None and effect.window is not None:
            claim = effect.window.status(out.started, out.ended)
        if out.error is not None:
            assert isinstance(out.error, EffectInProgress), out.error
            assert effect is not None, "EffectInProgress on an unclaimed key"
            assert claim != "expired", "EffectInProgress after the claim expired"
            event("effect in progress")
            return
        assert out.value.status == "run"
        if effect is not None and effect.holder != holder:
            assert claim != "live", f"{key} run by {holder} while {effect.holder}'s claim was live"
        if effect is None or effect.holder != holder:
            self.ledger.runs.setdefault(key, []).append(holder)
            event("effect run" if effect is None else "effect taken over")
        self.effects[key] = ModelEffect(
            "running", holder, Window.after(out.started, out.ended, seconds)
        )

    @rule(key=st.sampled_from(KEYS), handle=st.integers(0, 1))
    def effect_finish(self, key: str, handle: int) -> None:
        effect = self.effects.get(key)
        if effect is None:
            return  # finishing an effect nobody began is not pinned down by the contract
        result = {"n": next(self.results), "by": effect.holder}
        ticket = self.handles[handle].effect_finish(
            self.team, key, holder=effect.holder, result=result
        )
        assert ticket.status == "done"
        if effect.status == "done":
            assert ticket.result == effect.result, "a done key changed its result"
        else:
            assert ticket.result == result
            self.effects[key] = ModelEffect("done", effect.holder, None, result)

    @rule(key=st.sampled_from(KEYS), owner=st.booleans())
    def effect_abort(self, key: str, owner: bool) -> None:
        effect = self.effects.get(key)
        if effect is None:
            return
        holder = effect.holder if owner else next(w for w in WORKERS if w != effect.holder)
        self.handles[1].effect_abort(self.team, key, holder=holder)
        if owner and effect.status == "running":
            del self.effects[key]

    # invariants

    @invariant()
    def epoch_counter_matches(self) -> None:
        for handle in self.handles:
            assert handle.current_epoch(self.team) == self.counter

    @invariant()
    def current_lease_matches(self) -> None:
        out = timed(lambda: self.handles[1].current_lease(self.team))
        status = self.lease_status(out.started, out.ended)
        if status in (None, "expired"):
            assert out.value is None, f"lease {out.value} should be vacant"
        elif status == "live":
            assert self.lease is not None
            assert out.value is not None, "a live lease went missing"
            assert (out.value.holder, out.value.epoch) == (self.lease.holder, self.lease.epoch)
        elif out.value is not None:
            assert self.lease is not None
            assert (out.value.holder, out.value.epoch) == (self.lease.holder, self.lease.epoch)

    @invariant()
    def one_holder_per_epoch_in_the_event_log(self) -> None:
        events = self.handles[0].events(self.team, limit=100_000)
        claims = [(e.epoch, e.data.get("holder")) for e in events if e.kind == "lease.claimed"]
        epochs = [epoch for epoch, _ in claims]
        assert epochs == sorted(set(epochs)), f"epochs reused or out of order: {epochs}"
        assert dict(claims) == self.granted

    @invariant()
    def tasks_match(self) -> None:
        listed = self.handles[1].tasks(self.team)
        assert {t.task_id: t for t in listed} == self.tasks

    @invariant()
    def effects_run_at_most_once_and_keep_results(self) -> None:
        for key in KEYS:
            effect = self.effects.get(key)
            lookup = self.handles[0].effect_lookup(self.team, key)
            if effect is not None and effect.status == "done":
                assert lookup is not None
                assert lookup.result == effect.result
            else:
                assert lookup is None
        # Every extra run of a key is one its earlier holder gave up (abort or expiry),
        # which the step checks above allow; a done key never runs again.
        for key, effect in self.effects.items():
            if effect.status == "done":
                assert self.ledger.runs[key][-1] == effect.holder

    @invariant()
    def members_match(self) -> None:
        live = {m.member_id: m.highest_epoch for m in self.handles[0].members(self.team)}
        assert live == self.members


# --- messages ---------------------------------------------------------------------------

QUEUES = ["q1", "q2"]


@dataclass
class ModelMessage:
    message_id: str
    queue: str
    n: int
    deliveries: int = 0
    state: Literal["pending", "inflight", "acked", "dead"] = "pending"
    window: Window | None = None

    def visibility(self, started: float, ended: float) -> Literal["yes", "no", "maybe"]:
        if self.state == "pending":
            return "yes"
        if self.state != "inflight":
            return "no"
        assert self.window is not None
        status = self.window.status(started, ended)
        if status == "live":
            return "no"
        return "yes" if status == "expired" else "maybe"


class MessageMachine(TwoHandles):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[ModelMessage] = []
        self.numbers = itertools.count()

    def windows(self) -> list[Window]:
        return [m.window for m in self.messages if m.state == "inflight" and m.window]

    @rule(queue=st.sampled_from(QUEUES), handle=st.integers(0, 1))
    def send(self, queue: str, handle: int) -> None:
        n = next(self.numbers)
        message_id = self.handles[handle].send(self.team, queue, {"n": n})
        assert message_id not in {m.message_id for m in self.messages}
        self.messages.append(ModelMessage(message_id, queue, n))

    @rule(
        queue=st.sampled_from(QUEUES),
        handle=st.integers(0, 1),
        short=st.booleans(),
        max_messages=st.integers(1, 3),
    )
    def receive(self, queue: str, handle: int, short: bool, max_messages: int) -> None:
        timeout = SHORT if short else LONG
        out = timed(
            lambda: self.handles[handle].receive(
                self.team,
                queue,
                consumer=f"c{handle}",
                visibility_timeout=timeout,
                max_messages=max_messages,
                max_deliveries=MAX_DELIVERIES,
            )
        )
        assert out.error is None, out.error
        batch = out.value
        assert len(batch) <= max_messages
        mine = [m for m in self.messages if m.queue == queue]
        index = {m.message_id: i for i, m in enumerate(mine)}
        positions = []
        for delivery in batch:
            assert delivery.message_id in index, "delivered a message of another queue or team"
            model = mine[index[delivery.message_id]]
            seen = model.visibility(out.started, out.ended)
            assert model.state not in ("acked", "dead"), f"{model.state} message delivered"
            assert seen != "no", "delivered a message inside its visibility timeout"
            assert model.deliveries < MAX_DELIVERIES, "delivered past max_deliveries"
            assert delivery.delivery_count == model.deliveries + 1
            assert delivery.payload == {"n": model.n}
            positions.append(index[delivery.message_id])
            event("message redelivered" if model.deliveries else "message delivered")
        assert positions == sorted(positions), "batch out of FIFO order"
        dead_now = {d.message_id for d in self.handles[0].dead_letters(self.team, queue)}
        dead_before = {m.message_id for m in mine if m.state == "dead"}
        assert dead_before <= dead_now, "a dead letter came back"
        for message_id in dead_now - dead_before:
            model = mine[index[message_id]]
            assert model.deliveries >= MAX_DELIVERIES, "dead-lettered too early"
            assert model.visibility(out.started, out.ended) != "no"
            event("message dead-lettered")
        # Nothing visible is skipped: every visible message ahead of the batch's last one
        # (or every visible one at all when the batch is not full) was handled.
        delivered = {d.message_id for d in batch}
        horizon = positions[-1] if len(batch) == max_messages else len(mine)
        for i, model in enumerate(mine[:horizon]):
            if model.visibility(out.started, out.ended) != "yes":
                continue
            if model.deliveries >= MAX_DELIVERIES:
                assert model.message_id in dead_now, "an over-delivered message was skipped"
            else:
                assert model.message_id in delivered, f"visible message {i} was skipped"
        for model in mine:
            if model.message_id in delivered:
                model.deliveries += 1
                model.state = "inflight"
                model.window = Window.after(out.started, out.ended, timeout)
            elif model.message_id in dead_now:
                model.state = "dead"

    @rule(index=st.integers(0, 999), handle=st.integers(0, 1))
    def ack(self, index: int, handle: int) -> None:
        choices = [m for m in self.messages if m.state in ("inflight", "acked")]
        if not choices:
            return
        model = choices[index % len(choices)]
        acked = self.handles[handle].ack(self.team, model.queue, model.message_id)
        assert acked == (model.state == "inflight"), f"ack of {model.state} message gave {acked}"
        event(f"ack of {model.state} message")
        model.state = "acked"

    @invariant()
    def dead_letters_match(self) -> None:
        dead = {d.message_id for d in self.handles[1].dead_letters(self.team)}
        assert dead == {m.message_id for m in self.messages if m.state == "dead"}


def machine(cls: type[TwoHandles], url: str) -> Callable[[], TwoHandles]:
    bound = type(cls.__name__, (cls,), {"url": url})
    return bound


def test_leases_register_and_effects_follow_the_model(store_url: str) -> None:
    run_state_machine_as_test(machine(CoordinationMachine, store_url), settings=SETTINGS)


def test_messages_follow_the_model(store_url: str) -> None:
    run_state_machine_as_test(machine(MessageMachine, store_url), settings=MESSAGE_SETTINGS)
