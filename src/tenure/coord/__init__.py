"""Safety: leases, election, fencing memory and idempotent effects."""

from tenure.coord.credentials import (
    ANYONE,
    ENV_KEYS,
    LEAD,
    Credentials,
    SignatureRefused,
    TeamKeys,
    key_dir,
)
from tenure.coord.effects import run_effect
from tenure.coord.election import LEAD_CAPABILITY, Election, rank_of
from tenure.coord.epochs import EpochMemory
from tenure.coord.lease import LeaseKeeper, LeaseTiming, Renewer
from tenure.coord.lease_proof import LEASE, LeaseProofs, lease_body

__all__ = [
    "ANYONE",
    "ENV_KEYS",
    "LEAD",
    "Credentials",
    "SignatureRefused",
    "TeamKeys",
    "key_dir",
    "LEAD_CAPABILITY",
    "Election",
    "EpochMemory",
    "LEASE",
    "LeaseKeeper",
    "LeaseProofs",
    "LeaseTiming",
    "Renewer",
    "lease_body",
    "rank_of",
    "run_effect",
]
