"""Teams assembled from the parts below: a leader with the standard features, a
whole team in one process (``local``, and ``Team``, its Python API), leaderless queue
mode, sub-leaders of nested teams and their stand-ins, the operator's inbox, and the
readers of a team's state (``reading``)."""

from tenure.roles.teams.leader import Leader
from tenure.roles.teams.local import LocalTeam
from tenure.roles.teams.queue import QueueWorker, enqueue_plan
from tenure.roles.teams.reading import DecisionRecord
from tenure.roles.teams.result import RunResult, TaskOutcome
from tenure.roles.teams.subleader import SubLeader, TeamExecutor, child_plan, sub_leader
from tenure.roles.teams.team import Team

__all__ = [
    "DecisionRecord",
    "Leader",
    "LocalTeam",
    "QueueWorker",
    "RunResult",
    "SubLeader",
    "TaskOutcome",
    "Team",
    "TeamExecutor",
    "child_plan",
    "enqueue_plan",
    "sub_leader",
]
