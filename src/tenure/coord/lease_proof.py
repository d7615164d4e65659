"""A lease's proof: the team's lead key signing (team, "lease", holder, epoch).

The store is plain data: anything that can reach it can read a lease's holder and
epoch, release it and claim it again under the leader's own id. What it cannot
do is sign. So a leader signs its lease, and candidates respect only a lease
whose proof verifies with the team's lead public key.

The store chooses the epoch when a lease is claimed, so the claimer signs after:
it claims, then attaches the proof with ``prove_lease`` (fenced on holder and
epoch). Until then the lease is fresh and unproven, and it is respected for a
short grace (``LeaseTiming.proof_grace``, on the store's clock, from the claim).
Binding the epoch makes a proof copied out of the store worthless after a
re-claim, which always has a new epoch.
"""

from __future__ import annotations

import base64
from typing import Any

from cryptography.exceptions import InvalidSignature

from tenure.coord.credentials import LEAD, Credentials, TeamKeys
from tenure.protocol import TenureError
from tenure.protocol.errors import ConfigError
from tenure.protocol.signing import canonical
from tenure.store import Lease, Store

LEASE = "lease"  # the kind of body a lease proof signs


def lease_body(holder: str, epoch: int) -> dict[str, Any]:
    """What a lease proof covers, besides the team path and the kind."""
    return {"holder": holder, "epoch": epoch}


class LeaseProofs:
    """Judges a team's lease proofs with its lead public key; signs them too when it
    holds the lead key (a leader candidate's)."""

    def __init__(self, team: str, keys: TeamKeys, signer: Credentials | None = None) -> None:
        self.team = team
        self.keys = keys
        self.signer = signer

    @classmethod
    def of(cls, credentials: Credentials | None) -> LeaseProofs | None:
        """Proofs for a member holding the leading role; None unsigned (``--insecure``)."""
        if credentials is None or credentials.signer != LEAD:
            return None
        return cls(credentials.team, credentials.keys, credentials)

    @classmethod
    def checker(cls, credentials: Credentials | None, team: str) -> LeaseProofs | None:
        """Checks (never signs) the leases of ``team`` — a nested team, seen from its
        parent — with that team's lead public key from the same key directory. None
        unsigned, or when the key directory has no such key (nothing to check with)."""
        if credentials is None:
            return None
        keys = TeamKeys(credentials.keys.root, team)
        try:
            keys.lead()
        except TenureError:  # no such key here (a ConfigError naming the file)
            return None
        return cls(team, keys)

    def sign(self, holder: str, epoch: int) -> str:
        if self.signer is None:
            raise ConfigError(f"team {self.team!r}: no lead key to prove a lease with")
        return self.signer.sign(LEASE, lease_body(holder, epoch)).sig

    def refusal(self, lease: Lease, *, age: float, grace: float) -> str | None:
        """Why ``lease`` must not be respected, or None. ``age``: seconds since it was
        claimed, on the store's clock; an unproven lease is respected for ``grace``."""
        where = f"the lease {lease.holder!r} holds at epoch {lease.epoch}"
        if lease.proof is None:
            if age <= grace:
                return None
            return f"{where} carries no proof {age:.1f}s after its claim (grace {grace:g}s)"
        signed = canonical(self.team, LEASE, lease_body(lease.holder, lease.epoch))
        try:
            self.keys.lead().verify(base64.b64decode(lease.proof, validate=True), signed)
        except (InvalidSignature, ValueError):
            return f"{where} carries a proof the team's lead key did not make"
        return None

    def refused(self, store: Store, lease: Lease, grace: float) -> str | None:
        """``refusal`` with the lease's age read from the store's clock."""
        age = store.now() - lease.claimed_at if lease.proof is None else 0.0
        return self.refusal(lease, age=age, grace=grace)

    def respected(self, store: Store, lease: Lease | None, grace: float) -> Lease | None:
        """``lease`` if it is to be respected, else None: a refused lease leads nobody."""
        if lease is None or self.refused(store, lease, grace) is not None:
            return None
        return lease
