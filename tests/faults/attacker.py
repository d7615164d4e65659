"""An attacker with store access and, at most, one worker's key: a process of its own.

Usage: ``attacker.py ACTION STORE_URL TEAM [options as JSON]``. Each action writes to
the store the way a hostile process could (nothing here goes through a leader), then
exits. The tests run it as a separate OS process against the real SQLite file or
Redis a team is using, and check that nothing it asked for happened.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenure.coord import Credentials
from tenure.protocol import TaskEnvelope, TaskResult, idempotency_key, to_dict
from tenure.protocol.errors import LeaseLost, TenureError
from tenure.protocol.messages import AssignMessage, ResultMessage
from tenure.roles.member import LEADER_QUEUE, WORK_QUEUE, member_queue
from tenure.store import Lease, Store, open_store


def signed(body: Any, options: dict[str, Any], team: str, kind: str) -> Any:
    """The body signed with the worker key the attacker stole (if it has one); ``by``
    puts another signer id on that signature (one that is no member id, say)."""
    if not options.get("keys") or not options.get("sign_as"):
        return body
    stolen = Credentials.load(Path(options["keys"]), team, options["sign_as"], "work")
    signature = stolen.sign(kind, body)
    if options.get("by"):
        signature = signature.model_copy(update={"by": options["by"]})
    return body.model_copy(update={"signature": signature})


def forge_result(store: Store, team: str, options: dict[str, Any]) -> None:
    """A completed result for a task assigned to someone else, claiming to be from them."""
    task = store.get_task(team, options["task"])
    body = TaskResult(
        task_id=task.task_id,
        idempotency_key=idempotency_key(task.task_id, max(task.attempt, 1)),
        epoch=max(task.epoch, 1),
        status="completed",
        artifact={"forged": True, "task_id": task.task_id},
    )
    body = signed(body, options, team, "result")
    header = {"team": team, "from": options["claim"], "to": LEADER_QUEUE, "epoch": body.epoch}
    store.send(team, LEADER_QUEUE, to_dict(ResultMessage.model_validate({**header, "body": body})))


def inject_task(store: Store, team: str, options: dict[str, Any]) -> None:
    """A task of its own in the register, with a command check and an executor."""
    marker = options["marker"]
    spec = {
        "id": options["task"],
        "goal": "look harmless",
        "checks": [{"kind": "command", "run": f"touch {marker}.check"}],
        "executor": f"command:touch {marker}.exec",
    }
    store.create_task(team, options["task"], epoch=store.current_epoch(team), spec=spec)


def inject_assign(store: Store, team: str, options: dict[str, Any]) -> None:
    """A task.assign straight into a worker's queue, naming a command executor."""
    task_id, worker = options["task"], options["to"]
    epoch = max(store.current_epoch(team), 1)
    envelope = TaskEnvelope(
        task_id=task_id,
        idempotency_key=idempotency_key(task_id, 1),
        epoch=epoch,
        attempt=1,
        assigned_to=worker,
        deadline_seconds=30,
        goal="run this",
        executor=f"command:touch {options['marker']}",
    )
    envelope = signed(envelope, options, team, "envelope")
    header = {"team": team, "from": "L1", "to": worker, "epoch": epoch}
    message = AssignMessage.model_validate({**header, "body": envelope})
    store.send(team, member_queue(worker), to_dict(message))


def forge_done(store: Store, team: str, options: dict[str, Any]) -> None:
    """Move a task on to ``done`` with a forged result, as the leader would write it,
    through the store's own compare-and-set (no key: nothing it writes is sealed)."""
    task_id = options["task"]
    result = {
        "task_id": task_id,
        "idempotency_key": idempotency_key(task_id, 1),
        "epoch": 1,
        "status": "completed",
        "artifact": {"forged": True},
    }
    path = {"queued": "running", "running": "review", "review": "done"}
    while (task := store.get_task(team, task_id)).state in path:
        to = path[task.state]
        fields: dict[str, Any] = {"result": result} if to == "review" else {}
        if to == "done":
            fields["reason"] = "accepted: forged"
        store.transition(
            team,
            task_id,
            epoch=store.current_epoch(team),
            expect=[task.state],
            to=to,  # type: ignore[arg-type]
            version=task.version,
            **fields,
        )
    print(json.dumps({"state": store.get_task(team, task_id).state}), flush=True)


def join_keyless(store: Store, team: str, options: dict[str, Any]) -> None:
    """Join as a worker nobody made a key for, with the highest priority, live for a while."""
    store.join(
        team,
        options.get("as", "evil"),
        ttl=float(options.get("ttl", 60)),
        priority=100,
        capabilities=("work",),
        incarnation="evil-1",
    )


def enqueue_forged(store: Store, team: str, options: dict[str, Any]) -> None:
    """Queue mode: an envelope of the task's current attempt with a goal of its own,
    signed with a worker's key, straight into the shared queue."""
    task = store.get_task(team, options["task"])
    attempt = max(task.attempt, 1)
    envelope = TaskEnvelope(
        task_id=task.task_id,
        idempotency_key=idempotency_key(task.task_id, attempt),
        epoch=1,
        attempt=attempt,
        assigned_to=WORK_QUEUE,
        deadline_seconds=30,
        goal=options.get("goal", "FORGED GOAL"),
    )
    envelope = signed(envelope, options, team, "envelope")
    header = {"team": team, "from": options.get("sign_as", "w2"), "to": WORK_QUEUE, "epoch": 1}
    store.send(team, WORK_QUEUE, to_dict(AssignMessage.model_validate({**header, "body": envelope})))


def steal_lease(store: Store, team: str, options: dict[str, Any]) -> None:
    """Seize the leader's lease as ``as`` (the leader's own id, or any other) — its
    holder, epoch and proof are readable, and replacing a lease needs no token: members
    judge a lease by its proof, the store cannot — then command a worker under it.

    ``replay_proof``: copy the leader's proof out of the store onto the stolen lease.
    ``renew_for``: keep renewing the stolen lease for that many seconds, and say when
    a renewal is refused (the lease was seized back) or that it never was."""
    lease = store.current_lease(team)
    ttl = float(options.get("ttl", 1.0))
    token = secrets.token_urlsafe(24)  # the thief's own, for the lease it takes
    if lease is not None:
        stolen = store.seize_lease(team, options["as"], ttl, over=lease, token=token)
    else:
        stolen = store.claim_lease(team, options["as"], ttl, token=token)
    if options.get("replay_proof") and lease is not None and lease.proof is not None:
        store.prove_lease(team, stolen.holder, stolen.epoch, lease.proof, token=token)
    print(json.dumps({"epoch": stolen.epoch}), flush=True)
    inject_assign(store, team, options)
    if "renew_for" in options:
        keep_renewing(store, stolen, token, float(options["renew_for"]))


def keep_renewing(store: Store, stolen: Lease, token: str, seconds: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            store.renew_lease(stolen.team, stolen.holder, stolen.epoch, stolen.ttl, token=token)
        except LeaseLost:
            print(json.dumps({"lost": True, "held_for": time.monotonic() - started}), flush=True)
            return
        time.sleep(stolen.ttl / 4)
    print(json.dumps({"lost": False, "held_for": time.monotonic() - started}), flush=True)


def end_lease(store: Store, team: str, options: dict[str, Any]) -> None:
    """With what anyone reads of the leader's lease (holder, epoch, proof) and no token:
    release it, renew it, prove it; then claim and seize it far above the team's epoch.
    Prints the lease it read and what each try got (JSON)."""
    lease = store.current_lease(team)
    assert lease is not None, "no lease to attack"
    guesses = ["", lease.holder, secrets.token_urlsafe(24)]  # none, its name, a random one
    proof = lease.proof or "cHJvb2Y="
    said: dict[str, Any] = {"holder": lease.holder, "epoch": lease.epoch}
    said["release"] = [
        outcome(lambda g=g: store.release_lease(team, lease.holder, lease.epoch, token=g))
        for g in guesses
    ]
    said["renew"] = [
        outcome(lambda g=g: store.renew_lease(team, lease.holder, lease.epoch, 600.0, token=g))
        for g in guesses
    ]
    said["prove"] = [
        outcome(lambda g=g: store.prove_lease(team, lease.holder, lease.epoch, proof, token=g))
        for g in guesses
    ]
    mine = secrets.token_urlsafe(24)
    for far in (10**12, 2**53 - 2):
        said[f"claim {far}"] = outcome(
            lambda far=far: store.claim_lease(team, "evil", 600.0, token=mine, at_least=far)
        )
        said[f"seize {far}"] = outcome(
            lambda far=far: store.seize_lease(
                team, "evil", 600.0, over=lease, token=mine, at_least=far
            )
        )
    print(json.dumps(said), flush=True)


def outcome(attempt: Callable[[], object]) -> Any:
    """What an attempt got: its answer (``True``/``False``, "granted" for a lease), or
    the name of the error it raised and its message."""
    try:
        answer = attempt()
    except TenureError as exc:
        return [type(exc).__name__, str(exc)]
    return "granted" if isinstance(answer, Lease) else answer


def push_epoch(store: Store, team: str, options: dict[str, Any]) -> None:
    """Join as a member that claims to have seen an enormous epoch."""
    store.join(team, options.get("as", "pusher"), ttl=30, highest_epoch=int(options["epoch"]))


ACTIONS = {
    "forge-result": forge_result,
    "forge-done": forge_done,
    "join-keyless": join_keyless,
    "enqueue-forged": enqueue_forged,
    "inject-task": inject_task,
    "inject-assign": inject_assign,
    "steal-lease": steal_lease,
    "end-lease": end_lease,
    "push-epoch": push_epoch,
}


def main() -> None:
    action, url, team = sys.argv[1:4]
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    with open_store(url) as store:
        ACTIONS[action](store, team, options)


if __name__ == "__main__":
    main()
