"""Signing the register anew: after ``tenure keys rotate``, and when a team that ran
without keys goes on with them.

A leader does this once a term, before its first round, for the tasks the current
lead key does not cover (and nothing else):

- **rotated**: the spec and the last write were signed with the key the rotation
  replaced (``_lead.prev.pub``, kept by ``tenure keys rotate``): signed again with the
  current key. After ``tenure keys rotate --revoke`` there is no previous key and
  nothing is signed again: a person reviews those tasks.
- **adopted**: the spec carries no signature at all and is exactly what the
  operator's plan registers (``spec_for``): a run without keys (``--mode local``)
  wrote it, and the leader of that plan signs it and seals its record as it stands.
  Likewise a record with a signed spec and no seal at all: a register written
  before seals existed. Only until the team's register has been sealed once (the
  ledger's ``register:keyed``, written by the first leader that seals): from then
  on an unsigned task or an unsealed record is somebody else's, whatever it says.

An open task is written again in place (a new spec signature and seal); a finished one
cannot be, so its seal goes into the ledger (``seal.reseal``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tenure.coord import LEAD
from tenure.protocol import Plan, TenureError, to_dict
from tenure.protocol.errors import Conflict, EffectInProgress
from tenure.protocol.secrets import redact_value
from tenure.protocol.taskspec import TaskSpec, spec_for
from tenure.roles.register.access import Register
from tenure.roles.register.seal import FINAL_STATES, UNSEALED, by_previous_lead, reseal
from tenure.roles.register.task import SPEC, UNSIGNED, Task

__all__ = ["KEYED", "Resigned", "sign_again"]

KEYED = "register:keyed"  # ledger key: this team's register has been signed


@dataclass
class Resigned:
    """What a leader signed anew, by why."""

    rotated: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)


def sign_again(register: Register, plan: Plan | None, *, holder: str) -> Resigned:
    """Sign anew, with ``register``'s lead key, what it does not cover but the team
    wrote (see the module); the register is marked as signed from then on."""
    done = Resigned()
    credentials = register.credentials
    if credentials is None or credentials.signer != LEAD:
        return done
    store, team = register.store, register.team
    keyed = store.effect_lookup(team, KEYED) is not None
    planned = {} if plan is None or keyed else {t.id: spec_for(plan, t) for t in plan.tasks}
    for task in register.tasks():
        why = _why(register, task, planned, keyed)
        if why is None:
            continue
        try:
            _again(register, task, holder)
        except (Conflict, EffectInProgress):
            continue  # changed meanwhile: refused as it is, or signed again next term
        (done.rotated if why == "rotated" else done.adopted).append(task.task_id)
    if not keyed:
        _mark_keyed(register, holder)
    return done


def _why(
    register: Register, task: Task, planned: dict[str, TaskSpec], keyed: bool
) -> str | None:
    """``rotated`` or ``adopted`` if the task is the team's own, signed with a key the
    rotation replaced or by no key at all; None otherwise (or if nothing is wrong)."""
    credentials = register.credentials
    assert credentials is not None
    if task.problem is None or (task.tamper is None and not task.problem.startswith(UNSIGNED)):
        return None
    if task.tamper is not None and task.tamper.claimed == UNSEALED and not keyed:
        return "adopted"  # written before this register was ever sealed
    spec = task.spec
    if spec.signature is None:
        wanted = planned.get(task.task_id)
        return "adopted" if wanted is not None and _same(spec, wanted) else None
    if task.tamper is None and not credentials.by_previous_lead(SPEC, spec, spec.signature):
        return None  # a spec no key of the team's signed
    return "rotated" if by_previous_lead(task.record, credentials) else None


def _same(spec: TaskSpec, wanted: TaskSpec) -> bool:
    """The spec is the one ``wanted`` registers (as the store keeps it: redacted)."""
    kept = TaskSpec.model_validate(redact_value(to_dict(wanted)))
    return spec.model_copy(update={"signature": None}) == kept


def _again(register: Register, task: Task, holder: str) -> None:
    credentials = register.credentials
    assert credentials is not None
    if task.state in FINAL_STATES:
        if not reseal(
            register.store, task.record, credentials, epoch=register.epoch(), holder=holder
        ):
            raise Conflict(f"task {task.task_id!r}: its seal could not be written")
        return
    # a new spec signature and seal (its assignee's next write carries this seal as its grant)
    register.move(task, task.state, spec=task.spec, data=task.data.with_(grant=None, seal=None))


def _mark_keyed(register: Register, holder: str) -> None:
    try:
        ticket = register.store.effect_begin(
            register.team, KEYED, epoch=register.epoch(), holder=holder, claim_seconds=30
        )
        if ticket.status == "run":
            register.store.effect_finish(register.team, KEYED, holder=holder, result={"by": holder})
    except (EffectInProgress, TenureError):
        pass  # another leader marks it, or the next one does
