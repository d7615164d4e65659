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
    "LeaseKeeper",
    "LeaseTiming",
    "Renewer",
    "rank_of",
    "run_effect",
]
