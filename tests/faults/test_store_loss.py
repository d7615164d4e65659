"""Store loss is not split brain: Redis is wiped in the middle of a run.

The wipe forgets every epoch counter, lease, task, ledger entry and message, but
keeps the store's identity token, as a failover to a replica that had received
nothing of the team yet would (a wipe of the token too stops every member:
tests/faults/test_store_outages.py).
What must still hold: no worker obeys a leader whose epoch is below the
highest it has seen (each keeps that on its own disk), a leader comes back
above every epoch the members still hold, and no effect runs twice — the
register and the store's own ledger are gone, so the guarantee rests on the
deterministic idempotency keys reaching an effect site that honours them
(docs/deploy.md, "Store loss is not split brain").
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import redis_or_skip, wipe_redis
from tenure.coord import Credentials
from tenure.protocol import TaskEnvelope, idempotency_key
from tenure.roles import Mailbox
from tenure.store import Event

from .harness import Team, epoch_timeline, of_kind

pytestmark = pytest.mark.slow
WORKER_WRITES = ("effect.claimed", "task.transition")
# The tasks the workers finished under epoch 2 just before the wipe are dispatched again
# by the new leader with the same idempotency key; each worker absorbs the duplicate and
# sends its old epoch-2 result again, which the new leader drops, so those tasks are only
# retried once their deadline has passed. Each attempt sleeps at most 0.5 s: 8 s is a wide
# margin and waits 22 s less than the harness's 30 s.
DEADLINE = 8.0


def _worker_at(team: Team, epoch: int) -> str | None:
    """A worker whose own epoch memory (on its disk, not in the store) holds ``epoch``."""
    for name in ("w1", "w2", "w3"):
        path = team.dir / "state" / name / "members" / team.name / f"{name}.epoch.json"
        if path.exists() and json.loads(path.read_text())["highest_epoch"] >= epoch:
            return name
    return None


def _assign_as_a_forgotten_leader(team: Team, worker: str, *, epoch: int) -> None:
    envelope = TaskEnvelope(
        task_id=team.task_ids[-1],
        idempotency_key=idempotency_key(team.task_ids[-1], 1),
        epoch=epoch,
        attempt=1,
        assigned_to=worker,
        deadline_seconds=30,
        goal="append the ledger line",
    )
    leadership = Credentials.load(team.keys, team.name, "L0", "lead")  # a genuine leader's
    Mailbox(team.store, team.name, "L0", credentials=leadership).assign(envelope)


def _by_worker(event: Event) -> bool:
    """A fenced write a worker made: an effect claim, or marking its task running."""
    if event.kind == "effect.claimed":
        return str(event.data.get("holder", "")).startswith("w")
    return event.kind == "task.transition" and event.data.get("to") == "running"


@pytest.fixture
def redis_team(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Team]:
    monkeypatch.setenv("TENURE_FAULTS_KEYED", "1")  # the workers' ledger honours keys
    team = Team(tmp_path, redis_or_skip())
    try:
        yield team
    finally:
        try:
            team.stop_all()
            report = getattr(request.node, "report_call", None)
            if report is None or report.failed:  # as the `team` fixture does
                print(team.report())
        finally:
            team.close()


def test_a_wiped_redis_neither_obeys_a_stale_leader_nor_runs_an_effect_twice(
    redis_team: Team,
) -> None:
    team = redis_team
    team.write_plan(10, deadline=DEADLINE)
    first = team.start([("L1", 30), ("L2", 20)], workers=3, sleep="0.3-0.5")
    team.wait_for("two tasks done", lambda: team.done_count() >= 2, 30)
    team.signal("L1", signal.SIGKILL)  # so the epoch before the wipe is above 1
    second = team.next_election(first, 30)
    team.wait_for("four tasks done", lambda: team.done_count() >= 4, 30)
    before = team.store.current_epoch(team.name)
    assert before >= 2
    witness = team.wait_for(
        "a worker that has seen the current epoch", lambda: _worker_at(team, before), 30
    )

    team.signal("L2", signal.SIGSTOP)  # the old leader is away while the store is lost
    assert wipe_redis(team.url, keep_identity=True) > 0
    assert team.store.current_epoch(team.name) == 0
    # a leader that came back below the members' epochs: the store (counter 0) would
    # accept epoch 1, so only the workers' own memory stands between it and the work
    _assign_as_a_forgotten_leader(team, witness, epoch=1)
    ignored = team.wait_event(
        "follower.stale_envelope_ignored", 10, lambda e: e.data.get("member") == witness
    )
    assert ignored.data["epoch"] == 1 and ignored.data["highest"] >= before
    team.leader("L3", 40)  # a fresh candidate: no memory of any epoch
    team.wait_for(
        "a leader above every epoch held before the wipe",
        lambda: (
            team.store.current_epoch(team.name) > before and team.store.current_lease(team.name)
        ),
        30,
    )
    team.signal("L2", signal.SIGCONT)
    tasks = team.wait_settled(90)
    assert all(t.state == "done" for t in tasks), [(t.task_id, t.state, t.reason) for t in tasks]

    # no worker acted for a leader below the highest epoch granted so far: the
    # pre-wipe epoch (which only the members remember) or any granted since
    events = team.events()  # only what happened after the wipe survives in the store
    stale = [
        f"seq {e.seq} {e.kind} at epoch {e.epoch} < {max(before, current)}: {e.data}"
        for e, current in epoch_timeline(events)
        if _by_worker(e) and (e.epoch or 0) < max(before, current)
    ]
    assert stale == [], "a worker obeyed a stale leader after the wipe:\n" + "\n".join(stale)
    assert second.epoch == before

    # each task's effect happened once: the re-dispatched tasks were refused at the site
    lines = team.ledger().per_task()
    assert lines == dict.fromkeys(team.task_ids, 1), lines
    refused_path = Path(str(team.ledger_path) + ".refused")
    refused = (
        [json.loads(x) for x in refused_path.read_text().splitlines()]
        if (refused_path.exists())
        else []
    )
    assert refused, "the wipe should have made finished tasks run again, to be refused"
    print(
        f"epoch before the wipe {before}, after {team.store.current_epoch(team.name)}; "
        f"{len(refused)} repeated effect(s) refused at the effect site; "
        f"{len(of_kind(events, 'follower.stale_envelope_ignored'))} stale envelope(s) ignored"
    )
