"""Lease proofs on a clock the test moves: a candidate respects a lease its team's lead
key proved (or a fresh one inside the grace), and seizes any other at once, saying so.
Unsigned, leases are plain data as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import LEASE_TOKEN
from tenure.coord import Credentials, Election, LeaseKeeper, LeaseProofs, LeaseTiming
from tenure.coord.credentials import init_team, rotate_lead
from tenure.executors import TaskContext
from tenure.protocol import TaskEnvelope, TaskResult, idempotency_key
from tenure.protocol.errors import LeaseLost, StoreError
from tenure.roles import Follower, FollowerConfig, Mailbox, member_queue
from tenure.store import Event, Lease, ManualClock
from tenure.store.memory import MemoryStore

TEAM = "proved"
TIMING = LeaseTiming(ttl=10)  # renew every 3 s; an unproven lease is respected for 3 s


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    init_team(tmp_path, TEAM, ["w1"])
    return tmp_path


def lead_credentials(keys: Path, me: str = "L1") -> Credentials:
    return Credentials.load(keys, TEAM, me, "lead")


def signing(credentials: Credentials) -> LeaseProofs:
    proofs = LeaseProofs.of(credentials)
    assert proofs is not None
    return proofs


def candidate(store: MemoryStore, keys: Path | None, me: str, clock: ManualClock) -> Election:
    proofs = LeaseProofs.of(lead_credentials(keys, me)) if keys is not None else None
    keeper = LeaseKeeper(store, TEAM, me, TIMING, clock=clock, proofs=proofs)
    return Election(store, keeper, backoff=0, sleep=lambda _: None)


def events(store: MemoryStore, kind: str) -> list[Event]:
    return [e for e in store.events(TEAM) if e.kind == kind]


def live(store: MemoryStore) -> Lease:
    lease = store.current_lease(TEAM)
    assert lease is not None
    return lease


def test_a_leader_proves_every_lease_it_takes_with_the_lead_key(keys: Path) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    won = candidate(store, keys, "L1", clock).try_lead(0)
    assert won is not None and won.proof is not None
    assert live(store) == won
    proofs = signing(lead_credentials(keys, "L2"))  # any candidate verifies it
    assert proofs.refusal(won, age=1000.0, grace=0.0) is None
    assert [e.epoch for e in events(store, "lease.proved")] == [won.epoch]


def test_a_proved_lease_is_respected_for_as_long_as_it_lives(keys: Path) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    first = candidate(store, keys, "L1", clock)
    won = first.try_lead(0)
    assert won is not None
    second = candidate(store, keys, "L2", clock)
    for _ in range(5):
        clock.advance(2.5)
        assert first.keeper.renew()
        assert second.try_lead(0) is None
    assert live(store).epoch == won.epoch and events(store, "security.lease_refused") == []


def test_an_unproven_lease_is_respected_inside_the_grace_then_seized(keys: Path) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    forged = store.claim_lease(TEAM, "L9", 60.0, token=LEASE_TOKEN)  # store access, no lead key
    election = candidate(store, keys, "L1", clock)
    clock.advance(TIMING.proof_grace)
    assert election.try_lead(0) is None  # it may be a claimer about to prove it
    clock.advance(0.1)
    seized = election.try_lead(0)
    assert seized is not None and seized.epoch == forged.epoch + 1
    assert seized.holder == "L1" and seized.proof is not None
    [refused] = events(store, "security.lease_refused")
    assert refused.data["leader"] == "L1"
    assert (refused.data["claimed"], refused.data["epoch"]) == ("L9", forged.epoch)
    assert "carries no proof" in refused.data["reason"]
    with pytest.raises(LeaseLost):  # the thief's renewals fail from now on
        store.renew_lease(TEAM, "L9", forged.epoch, 60.0, token=LEASE_TOKEN)


@pytest.mark.parametrize("forgery", ["copied", "other key", "garbage", "too long"])
def test_a_lease_whose_proof_does_not_verify_is_seized_at_once(
    keys: Path, tmp_path: Path, forgery: str
) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    proofs = signing(lead_credentials(keys))
    proof = {
        "copied": proofs.sign("L1", 1),  # a real proof, of epoch 1, replayed on epoch 2
        "other key": signing(_other_lead(tmp_path)).sign("L1", 2),
        "garbage": "bm90IGEgc2lnbmF0dXJl",
        "too long": "A" * 300,
    }[forgery]
    first = store.claim_lease(TEAM, "L1", 60.0, token=LEASE_TOKEN)
    store.release_lease(TEAM, "L1", first.epoch, token=LEASE_TOKEN)
    forged = store.claim_lease(TEAM, "L1", 60.0, token=LEASE_TOKEN)
    store.prove_lease(TEAM, "L1", forged.epoch, proof, token=LEASE_TOKEN)
    seized = candidate(store, keys, "L2", clock).try_lead(0)  # no grace for a false proof
    assert seized is not None and seized.holder == "L2"
    [refused] = events(store, "security.lease_refused")
    assert refused.data["claimed"] == "L1" and refused.data["epoch"] == forged.epoch
    assert "did not make" in refused.data["reason"]


def _other_lead(tmp_path: Path) -> Credentials:
    elsewhere = tmp_path / "elsewhere"
    init_team(elsewhere, TEAM)
    rotate_lead(elsewhere, TEAM)
    return Credentials.load(elsewhere, TEAM, "L1", "lead")


def test_a_lease_in_a_candidates_own_name_it_never_claimed_is_seized_at_once(
    keys: Path,
) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    election = candidate(store, keys, "L1", clock)
    mine = election.try_lead(0)
    assert mine is not None
    # store access without the lead key or the lease's token: seized under L1's own name
    stolen = store.seize_lease(TEAM, "L1", 60.0, over=live(store), token=LEASE_TOKEN)
    assert not election.keeper.renew()
    [taken] = events(store, "security.lease_taken")
    assert taken.data == {"leader": "L1", "epoch": mine.epoch, "taken_at": stolen.epoch}
    back = election.try_lead(0)
    assert back is not None and back.epoch == stolen.epoch + 1 and back.proof is not None
    [refused] = events(store, "security.lease_refused")
    assert "never claimed" in refused.data["reason"]


def test_of_two_candidates_seizing_one_lease_one_wins(keys: Path) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    forged = store.claim_lease(TEAM, "L9", 60.0, token=LEASE_TOKEN)
    clock.advance(TIMING.proof_grace + 1)
    first, second = (candidate(store, keys, me, clock) for me in ("L1", "L2"))
    refused = live(store)
    assert first.overrule(refused, 0) is not None
    assert second.overrule(refused, 0) is None  # the lease it refused is gone
    assert second.try_lead(0) is None  # and the new one is proved
    seizures = [e for e in events(store, "lease.claimed") if "over_epoch" in e.data]
    assert [(e.data["holder"], e.data["over_epoch"]) for e in seizures] == [("L1", forged.epoch)]


def test_a_lease_seized_before_its_claimer_proved_it_is_not_used(keys: Path) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    rival = candidate(store, keys, "L2", clock)
    slow = candidate(store, keys, "L1", clock)
    claim = store.claim_lease

    def claim_then_lose(
        team: str, holder: str, ttl: float, *, token: str, at_least: int = 0
    ) -> Lease:
        """The rival seizes the lease between its claim and its proof."""
        lease = claim(team, holder, ttl, token=token, at_least=at_least)
        clock.advance(TIMING.proof_grace + 1)
        assert rival.try_lead(0) is not None
        return lease

    store.claim_lease = claim_then_lose  # type: ignore[method-assign]
    with pytest.raises(LeaseLost):
        slow.try_lead(0)
    assert not slow.keeper.valid()
    assert live(store).holder == "L2"


def test_unsigned_candidates_respect_every_lease_as_before() -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    store.claim_lease(TEAM, "L9", 60.0, token=LEASE_TOKEN)
    election = candidate(store, None, "L1", clock)
    clock.advance(30)
    assert election.try_lead(0) is None
    assert events(store, "security.lease_refused") == []
    clock.advance(31)
    won = election.try_lead(0)
    assert won is not None and won.proof is None  # nothing to prove it with


def test_a_forged_lease_moves_no_follower(keys: Path) -> None:
    """A worker learns epochs from envelopes its leadership signed, never from the lease:
    an envelope sent under a stolen lease is refused and its epoch is not remembered."""
    store = MemoryStore()
    lease = store.claim_lease(TEAM, "L1", 60.0, token=LEASE_TOKEN)
    worker = Credentials.load(keys, TEAM, "w1", "work")
    follower = Follower(
        store, FollowerConfig(team=TEAM, member_id="w1", credentials=worker), _Never()
    )
    follower.heartbeat.join()
    store.release_lease(TEAM, "L1", lease.epoch, token=LEASE_TOKEN)
    stolen = store.claim_lease(TEAM, "L1", 60.0, token=LEASE_TOKEN)
    store.create_task(TEAM, "t1", epoch=stolen.epoch, spec={"goal": "g"})
    env = TaskEnvelope(
        task_id="t1",
        idempotency_key=idempotency_key("t1", 1),
        epoch=stolen.epoch,
        attempt=1,
        assigned_to="w1",
        deadline_seconds=30,
        goal="run this",
    )
    Mailbox(store, TEAM, "L1").assign(env)  # no lead key: unsigned
    assert follower.poll_once()
    assert follower.memory.highest == 0 and follower.executed == 0
    follower.heartbeat.beat()
    [member] = store.members(TEAM)
    assert member.highest_epoch == 0
    [refused] = [e for e in store.events(TEAM) if e.kind == "security.envelope_refused"]
    assert refused.data["epoch"] == stolen.epoch
    assert store.receive(TEAM, member_queue("w1"), consumer="w1", visibility_timeout=1) == []


class _Never:
    def execute(self, envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
        raise AssertionError("a refused envelope was executed")


class _NoSeizure(MemoryStore):
    """A store that refuses every seizure, as one whose epochs were used up did."""

    seizures = 0

    def seize_lease(self, *args: object, **kwargs: object) -> Lease:
        self.seizures += 1
        raise StoreError(f"team {TEAM!r}: its epochs are used up")


def test_a_refused_lease_is_reported_once_however_many_rounds_it_stands(keys: Path) -> None:
    clock = ManualClock()
    store = _NoSeizure(clock=clock)
    forged = store.claim_lease(TEAM, "L9", 60.0, token=LEASE_TOKEN)
    clock.advance(TIMING.proof_grace + 1)
    election = candidate(store, keys, "L1", clock)
    for _ in range(20):  # a leader's campaign loop: about 12 rounds a second
        with pytest.raises(StoreError):
            election.try_lead(0)
    assert store.seizures == 20  # acted on at every round, as before
    [refused] = events(store, "security.lease_refused")
    assert (refused.data["claimed"], refused.data["epoch"]) == ("L9", forged.epoch)
    store.release_lease(TEAM, "L9", forged.epoch, token=LEASE_TOKEN)
    again = store.claim_lease(TEAM, "L9", 60.0, token=LEASE_TOKEN)  # another refused lease
    clock.advance(TIMING.proof_grace + 1)
    for _ in range(3):
        with pytest.raises(StoreError):
            election.try_lead(0)
    said = [e.data["epoch"] for e in events(store, "security.lease_refused")]
    assert said == [forged.epoch, again.epoch]
