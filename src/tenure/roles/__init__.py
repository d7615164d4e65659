"""Behaviour: leaders, followers, the local team and the leaderless queue."""

from tenure.roles.leader.candidate import Leader, LeaderConfig
from tenure.roles.leader.conductor import Conductor
from tenure.roles.member.follower import Follower, FollowerConfig
from tenure.roles.member.wire import LEADER_QUEUE, WORK_QUEUE, Mailbox, envelope_for, member_queue
from tenure.roles.register.plan import plan_spec

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
