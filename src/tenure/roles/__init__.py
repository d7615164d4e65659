"""Behaviour: who does what in a team. Sub-packages, lowest first (each imports only
those before it):

- ``register``: the typed register every role reads and writes;
- ``member``: the runtime of every member process (wire, heartbeat, the attempt
  runner, the follower);
- ``planning``: the LLM planner and the rules a plan must keep;
- ``leader``: the conductor, the reviewer and its ladder, the hook points;
- ``features``: leader features as hooks (budgets, quorum, split, nested teams);
- ``teams``: teams assembled from those (a leader with the features, local mode and
  ``Team``, its Python API, queue mode, sub-leaders, the operator's inbox, the
  readers of a team's state);
- ``coding``: coding-agent teams on the same runtime, laid out as files in git.
"""

from tenure.roles.leader import Candidate, Conductor, LeaderConfig, LeaderContext, LeaderHook
from tenure.roles.member import (
    LEADER_QUEUE,
    WORK_QUEUE,
    Follower,
    FollowerConfig,
    Mailbox,
    envelope_for,
    member_queue,
)
from tenure.roles.teams import Leader, LocalTeam, QueueWorker, enqueue_plan

__all__ = [
    "LEADER_QUEUE",
    "WORK_QUEUE",
    "Candidate",
    "Conductor",
    "Follower",
    "FollowerConfig",
    "Leader",
    "LeaderConfig",
    "LeaderContext",
    "LeaderHook",
    "LocalTeam",
    "Mailbox",
    "QueueWorker",
    "envelope_for",
    "enqueue_plan",
    "member_queue",
]
