"""Teams assembled from the parts below: a leader with the standard features, a
whole team in one process (``local``), leaderless queue mode, sub-leaders of
nested teams and their stand-ins, and the operator's inbox."""

from tenure.roles.teams.leader import Leader
from tenure.roles.teams.local import LocalTeam
from tenure.roles.teams.queue import QueueWorker, enqueue_plan
from tenure.roles.teams.subleader import SubLeader, TeamExecutor, child_plan, sub_leader

__all__ = [
    "Leader",
    "LocalTeam",
    "QueueWorker",
    "SubLeader",
    "TeamExecutor",
    "child_plan",
    "enqueue_plan",
    "sub_leader",
]
