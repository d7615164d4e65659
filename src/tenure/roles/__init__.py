"""Behaviour: leaders, followers, the local team and the leaderless queue."""

from tenure.roles.conductor import Conductor
from tenure.roles.follower import Follower, FollowerConfig
from tenure.roles.leader import Leader, LeaderConfig
from tenure.roles.register_plan import plan_spec
from tenure.roles.wire import LEADER_QUEUE, WORK_QUEUE, Mailbox, envelope_for, member_queue

__all__ = [
    "LEADER_QUEUE",
    "WORK_QUEUE",
    "Conductor",
    "Follower",
    "FollowerConfig",
    "Leader",
    "LeaderConfig",
    "Mailbox",
    "envelope_for",
    "member_queue",
    "plan_spec",
]
