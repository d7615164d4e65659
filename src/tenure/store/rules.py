"""The rules every store backend applies the same way, so that SQLite, Redis and memory
refuse the same input with the same words: argument checks (epochs, waits, slots,
priorities, lease proofs and tokens), the compare-and-set and move checks of the
register, whose attempt a ``begin_attempt`` may start, and how a new epoch is chosen.

``Store`` (``base.py``) is the contract; this module is what its backends share.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Any

from tenure.protocol.envelope import MAX_EPOCH, MAX_EPOCH_JUMP
from tenure.protocol.errors import (
    Conflict,
    MemberIdTaken,
    ProtocolError,
    StoreError,
)
from tenure.protocol.limits import MAX_PRIORITY, MAX_SLOTS, MIN_PRIORITY
from tenure.store.records import (
    ALLOWED_TRANSITIONS,
    Lease,
    TaskRecord,
    TaskState,
)
from tenure.store.writes import Expect, Move


def check_cas(
    current: TaskRecord, expected: frozenset[TaskState], to: TaskState, version: int | None
) -> None:
    """The compare-and-set rule every backend applies before a transition."""
    where = f"task {current.task_id!r}"
    if current.state not in expected:
        raise Conflict(f"{where} is {current.state}, expected {' or '.join(sorted(expected))}")
    if version is not None and current.version != version:
        raise Conflict(f"{where} is at version {current.version}, expected {version}")
    if to not in ALLOWED_TRANSITIONS[current.state]:
        raise Conflict(f"{where}: {current.state} -> {to} is not an allowed transition")


def check_move(task_id: str, state: TaskState, version: int, move: Move) -> None:
    """``check_cas`` for a ``Move`` of ``commit``, against the state it will find."""
    where = f"task {task_id!r}"
    if state not in move.expect:
        raise Conflict(f"{where} is {state}, expected {' or '.join(sorted(move.expect))}")
    if move.version is not None and version != move.version:
        raise Conflict(f"{where} is at version {version}, expected {move.version}")
    if move.to not in ALLOWED_TRANSITIONS[state]:
        raise Conflict(f"{where}: {state} -> {move.to} is not an allowed transition")


def check_expected(expect: Expect, version: int) -> None:
    """An ``Expect`` of ``commit``: the task is still at the version the step read."""
    if version != expect.version:
        raise Conflict(
            f"task {expect.task_id!r} is at version {version}, expected {expect.version}"
        )


def attempt_is_ours(task: TaskRecord, attempt: int, holder: str, take: bool) -> bool:
    """``begin_attempt``'s rule: the task waits for this attempt, and for this holder
    (or, taking it in queue mode, for whoever takes it)."""
    if task.state not in ("queued", "running") or task.attempt != attempt:
        return False
    return take or task.assignee == holder


def check_epoch(field: str, value: Any) -> int:
    """An epoch as every backend stores it exactly: a whole number from 0 to ``MAX_EPOCH``
    (2^53 - 1). Anything else is refused before it is written, naming the field."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EPOCH:
        raise ProtocolError(field, f"a whole number from 0 to {MAX_EPOCH}, got {value!r}")
    return value


def check_wait(value: Any) -> float:
    """A ``receive`` wait: a number of seconds, zero or more (zero: do not wait)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ProtocolError("wait", f"zero or more seconds, got {value!r}")
    return float(value)


def check_slots(slots: Any) -> int:
    """A member's slots as every backend stores them: a whole number from 1 to
    ``MAX_SLOTS``; anything else is refused before it is written."""
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        raise ProtocolError("slots", f"a whole number from 1 to {MAX_SLOTS}, got {slots!r}")
    return slots


def check_priority(priority: Any) -> int:
    """A member's priority as every backend keeps it exactly: a whole number from
    ``MIN_PRIORITY`` to ``MAX_PRIORITY``; anything else is refused before it is written."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not MIN_PRIORITY <= priority <= MAX_PRIORITY
    ):
        raise ProtocolError(
            "priority", f"a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}, got {priority!r}"
        )
    return priority


def check_free(free_slots: Any) -> int | None:
    """Free slots as a member says them: a whole number from 0, or None (not said). A
    backend keeps at most the member's slots."""
    if free_slots is not None and (
        isinstance(free_slots, bool) or not isinstance(free_slots, int) or free_slots < 0
    ):
        raise ProtocolError("free_slots", f"a whole number from 0 up, got {free_slots!r}")
    return free_slots


MAX_PROOF_CHARS = 512
"""A lease proof is a short printable string (an Ed25519 signature in base64 is 88)."""


def check_proof(value: Any) -> str:
    """A lease proof as every backend stores it: printable ASCII, 1 to ``MAX_PROOF_CHARS``."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_PROOF_CHARS
        or not (value.isascii() and value.isprintable())
    ):
        shown = value if not isinstance(value, str) else value[:40]
        raise ProtocolError(
            "proof", f"printable ASCII of 1 to {MAX_PROOF_CHARS} characters, got {shown!r}"
        )
    return value


def same_lease(lease: Lease | None, over: Lease) -> bool:
    """The seize rule: the stored lease is still the one the caller refused."""
    return lease is not None and (lease.holder, lease.epoch, lease.proof) == (
        over.holder,
        over.epoch,
        over.proof,
    )


def next_epoch(team: str, counter: int, at_least: int, reported: Iterable[int]) -> int:
    """The epoch of a new claim: one above the counter, ``at_least`` (the claimer's own
    memory) and what live members report. Neither may lift it far: ``at_least`` more
    than ``MAX_EPOCH_JUMP`` above the counter is refused (``ProtocolError``), and a
    member's report counts only up to ``MAX_EPOCH_JUMP`` above the other two, so no
    caller can push a team's epochs toward the end of the epoch space in one step.
    ``StoreError`` once that space is used up."""
    check_jump(team, counter, at_least)
    base = max(counter, at_least)
    honest = [r for r in reported if r <= base + MAX_EPOCH_JUMP]
    epoch = max([base, *honest]) + 1
    if epoch > MAX_EPOCH:
        raise StoreError(f"team {team!r}: its epochs are used up (the limit is {MAX_EPOCH})")
    return epoch


def check_jump(team: str, counter: int, at_least: int) -> None:
    """The bound on ``at_least``: at most ``MAX_EPOCH_JUMP`` above the team's counter."""
    if at_least > counter + MAX_EPOCH_JUMP:
        raise jump_refused(team, counter, at_least)


def jump_refused(team: str, counter: int, at_least: int) -> ProtocolError:
    """The refusal of an ``at_least`` too far above the team's epoch counter."""
    return ProtocolError(
        "at_least",
        f"at most {MAX_EPOCH_JUMP} above team {team!r}'s epoch counter {counter}, got {at_least}",
    )


LEASE_TOKEN_CHARS = (16, 256)
"""How long a lease token may be: enough to be unguessable, short enough to send."""


def new_lease_token() -> str:
    """A fresh holder token for one lease: 192 random bits, URL-safe text."""
    return secrets.token_urlsafe(24)


def check_token(value: Any) -> str:
    """A lease token as a claim accepts it: printable ASCII of 16 to 256 characters.
    The refusal never shows the value: it may be someone's secret."""
    low, high = LEASE_TOKEN_CHARS
    if (
        not isinstance(value, str)
        or not low <= len(value) <= high
        or not (value.isascii() and value.isprintable())
    ):
        raise ProtocolError("token", f"printable ASCII of {low} to {high} characters")
    return value


def token_hash(token: str) -> str:
    """What a backend keeps of a lease token: its SHA-1 in hex, the same on every backend
    (Redis' Lua computes it with ``redis.sha1hex``). The token is 192 random bits, so
    the hash gives nobody who reads it a way back to the token."""
    return hashlib.sha1(token.encode("utf-8")).hexdigest()


def token_matches(stored: str | None, token: Any) -> bool:
    """Whether ``token`` is the one the lease was claimed with (``stored`` is its hash).

    A lease with no stored hash — claimed before leases had tokens (an older SQLite
    file or Redis) — matches no token at all: nobody can renew, prove or release it,
    so nobody who merely reads its holder and epoch can end it; it lapses by its TTL
    and the team elects again as after any leader's death."""
    if not stored or not isinstance(token, str) or not token:
        return False
    return hmac.compare_digest(stored, token_hash(token))


def taken(
    team: str, member_id: str, now: float, beat_at: float, expires_at: float
) -> MemberIdTaken:
    """The refusal of a join or heartbeat under a live member's id."""
    return MemberIdTaken(team, member_id, beat_ago=now - beat_at, wait=expires_at - now)
