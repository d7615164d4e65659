"""An attacker with store access and, at most, one worker's key: a process of its own.

Usage: ``attacker.py ACTION STORE_URL TEAM [options as JSON]``. Each action writes to
the store the way a hostile process could (nothing here goes through a leader), then
exits. The tests run it as a separate OS process against the real SQLite file or
Redis a team is using, and check that nothing it asked for happened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tenure.coord import Credentials
from tenure.protocol import TaskEnvelope, TaskResult, idempotency_key, to_dict
from tenure.protocol.messages import AssignMessage, ResultMessage
from tenure.roles.member import LEADER_QUEUE, member_queue
from tenure.store import Store, open_store


def signed(body: Any, options: dict[str, Any], team: str, kind: str) -> Any:
    """The body signed with the worker key the attacker stole (if it has one)."""
    if not options.get("keys") or not options.get("sign_as"):
        return body
    stolen = Credentials.load(Path(options["keys"]), team, options["sign_as"], "work")
    return body.model_copy(update={"signature": stolen.sign(kind, body)})


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


def steal_lease(store: Store, team: str, options: dict[str, Any]) -> None:
    """Release the leader's lease (holder and epoch are readable) and claim it as the
    leader's own id; then command a worker under that lease."""
    lease = store.current_lease(team)
    if lease is not None:
        store.release_lease(team, lease.holder, lease.epoch)
    stolen = store.claim_lease(team, options["as"], float(options.get("ttl", 1.0)))
    print(json.dumps({"epoch": stolen.epoch}), flush=True)
    inject_assign(store, team, options)


def push_epoch(store: Store, team: str, options: dict[str, Any]) -> None:
    """Join as a member that claims to have seen an enormous epoch."""
    store.join(team, options.get("as", "pusher"), ttl=30, highest_epoch=int(options["epoch"]))


ACTIONS = {
    "forge-result": forge_result,
    "inject-task": inject_task,
    "inject-assign": inject_assign,
    "steal-lease": steal_lease,
    "push-epoch": push_epoch,
}


def main() -> None:
    action, url, team = sys.argv[1:4]
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    with open_store(url) as store:
        ACTIONS[action](store, team, options)


if __name__ == "__main__":
    main()
