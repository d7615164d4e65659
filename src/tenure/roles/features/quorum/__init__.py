"""Quorum: k of n independent executions must agree (see ``hook``)."""

from tenure.roles.features.quorum.count import count_votes, quorum_check
from tenure.roles.features.quorum.hook import SETTLED, QuorumHook, held_back
from tenure.roles.features.quorum.rounds import VOTER_CHECKS, replica_id

__all__ = [
    "SETTLED",
    "VOTER_CHECKS",
    "QuorumHook",
    "count_votes",
    "held_back",
    "quorum_check",
    "replica_id",
]
