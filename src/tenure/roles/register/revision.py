"""The plan a team runs, revision by revision: its digest, and the changelog of goal shifts.

Kept in the store's idempotency ledger, because that is what it is: revision ``n`` of a
team's plan is applied once, under a key, fenced by the applier's epoch, and two
appliers racing for the same revision cannot both win. ``plan-request:<n>`` is a
replan asked for (by the operator), ``plan-revision:<n>`` the change as applied. The
ledger is never trimmed with the event log, so the digest outlives old events.

A revision's ``digest`` tells an unchanged re-run (same digest: resume, or nothing to
do) from a changed plan under the same team (refused: that is what ``tenure replan``
is for).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

from tenure.protocol import Plan, new_id
from tenure.protocol.errors import EffectInProgress
from tenure.store import Store

__all__ = [
    "PlanRequest",
    "Revision",
    "last_number",
    "fresh_key",
    "fresh_record",
    "interrupted_fresh",
    "latest_revision",
    "pending_request",
    "plan_digest",
    "record_revision",
    "request_key",
    "revision_key",
    "revisions",
    "write_fresh",
    "write_request",
]

CLAIM_SECONDS = 30.0
MAX_REVISIONS = 10_000  # a team replanned more often than this is not scanned further


def plan_digest(plan: Plan) -> str:
    """A stable digest of what the plan asks (the same plan as YAML or Markdown agrees)."""
    data = plan.model_dump(mode="json", by_alias=True, exclude={"planning_spend"})
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def fresh_key(revision: int) -> str:
    return f"plan-fresh:{revision}"


def request_key(revision: int) -> str:
    return f"plan-request:{revision}"


def revision_key(revision: int) -> str:
    return f"plan-revision:{revision}"


class Revision(BaseModel):
    """One entry of the plan's changelog: what changed, why, who applied it, when."""

    revision: int = Field(ge=1)
    digest: str
    reason: str = ""
    by: str = ""  # who asked for it
    applied_by: str = ""  # the leader (or operator) that applied it, holding the lease
    at: float = 0.0
    mode: str = ""  # "let running finish" | "cancel running" | "" (the first plan)
    added: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    refused: str | None = None  # the request was not applied: why

    @property
    def applied(self) -> bool:
        return self.refused is None


class PlanRequest(BaseModel):
    """A replan asked for: the whole new plan, how running tasks are treated, and why.
    Signed with the team's lead key when the team is signed."""

    revision: int = Field(ge=2)
    plan: dict[str, Any]
    reason: str = ""
    cancel_running: bool = False
    by: str = "operator"
    at: float = 0.0
    signature: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        """What the signature covers."""
        return self.model_dump(mode="json", exclude={"signature"})


def revisions(store: Store, team: str) -> list[Revision]:
    """Every revision of the team's plan, oldest first (empty: none recorded)."""
    found = []
    for n in range(1, MAX_REVISIONS):
        ticket = store.effect_lookup(team, revision_key(n))
        if ticket is None:
            break
        found.append(Revision.model_validate(ticket.result))
    return found


def latest_revision(store: Store, team: str) -> Revision | None:
    """The revision the team runs now (the last applied one), or None."""
    applied = [r for r in revisions(store, team) if r.applied]
    return applied[-1] if applied else None


def last_number(store: Store, team: str) -> int:
    """The number of the last revision settled (applied or refused); 0 for none."""
    found = revisions(store, team)
    return found[-1].revision if found else 0


def pending_request(store: Store, team: str, after: int) -> PlanRequest | None:
    """The replan asked for right after revision ``after`` and not applied yet, if any."""
    if store.effect_lookup(team, revision_key(after + 1)) is not None:
        return None
    ticket = store.effect_lookup(team, request_key(after + 1))
    return None if ticket is None else PlanRequest.model_validate(ticket.result)


def interrupted_fresh(store: Store, team: str) -> dict[str, int] | None:
    """The attempt counts a fresh start recorded before clearing the register, if that
    fresh start has not been completed (its revision is missing): resume it, never run."""
    after = last_number(store, team)
    ticket = store.effect_lookup(team, fresh_key(after + 1))
    if ticket is None:
        return None
    return {str(k): int(v) for k, v in dict(ticket.result["attempts"]).items()}


def write_fresh(
    store: Store,
    team: str,
    revision: int,
    attempts: dict[str, int],
    *,
    epoch: int,
    holder: str,
    ended: dict[str, Any] | None = None,
) -> bool:
    """Record, before the register is cleared, how far each task's attempts went, and
    how the run it ends stood (``ended``: its last change, task counts, spend), which
    the cleared register no longer holds."""
    result: dict[str, Any] = {"attempts": attempts}
    if ended is not None:
        result["ended"] = ended
    return _record(store, team, fresh_key(revision), epoch=epoch, holder=holder, result=result)


def fresh_record(store: Store, team: str, revision: int) -> dict[str, Any] | None:
    """What the fresh start to ``revision`` recorded before clearing (``write_fresh``)."""
    ticket = store.effect_lookup(team, fresh_key(revision))
    return None if ticket is None else dict(ticket.result)


def _record(store: Store, team: str, key: str, *, epoch: int, holder: str, result: Any) -> bool:
    """Record ``result`` under ``key`` once; False if the key was taken already. The
    holder is unique to this call, so two writers of one name cannot share a claim."""
    holder = f"{holder}-{new_id()}"
    try:
        ticket = store.effect_begin(
            team, key, epoch=epoch, holder=holder, claim_seconds=CLAIM_SECONDS
        )
    except EffectInProgress:
        return False
    if ticket.status == "done":
        return False
    store.effect_finish(team, key, holder=holder, result=result)
    return True


def record_revision(store: Store, team: str, revision: Revision, *, epoch: int) -> bool:
    """Record an applied revision (fenced); False if that revision exists already."""
    result = revision.model_dump(mode="json")
    return _record(
        store, team, revision_key(revision.revision), epoch=epoch, holder=revision.by, result=result
    )


def write_request(store: Store, team: str, request: PlanRequest, *, epoch: int) -> bool:
    """Ask for a replan (fenced); False if a replan to that revision was asked already."""
    result = request.model_dump(mode="json")
    return _record(
        store, team, request_key(request.revision), epoch=epoch, holder=request.by, result=result
    )
