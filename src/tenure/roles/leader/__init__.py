"""The leader: the conductor (load, dispatch, supervise), the reviewer and its ladder
(verify, accept, retry, escalate), the hook points leader features plug into, and the
candidate that campaigns for the lease and conducts while it holds it."""

from tenure.roles.leader.candidate import Candidate, LeaderConfig, Outcome
from tenure.roles.leader.conductor import Conductor
from tenure.roles.leader.hooks import (
    GO,
    HOLD,
    Admission,
    Dispatch,
    Hooks,
    LeaderContext,
    LeaderHook,
    Review,
    Stop,
    Watch,
)
from tenure.roles.leader.review import Judging, Reviewer

__all__ = [
    "GO",
    "HOLD",
    "Admission",
    "Candidate",
    "Conductor",
    "Dispatch",
    "Hooks",
    "Judging",
    "LeaderConfig",
    "LeaderContext",
    "LeaderHook",
    "Outcome",
    "Review",
    "Reviewer",
    "Stop",
    "Watch",
]
