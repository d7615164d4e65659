"""The member runtime every process of a team runs: the wire (queues, sending,
envelopes), membership heartbeats, the one attempt runner, and the follower."""

from tenure.roles.member.attempt import AttemptRunner, Ran
from tenure.roles.member.follower import Follower, FollowerConfig
from tenure.roles.member.heartbeat import MemberHeartbeat
from tenure.roles.member.wire import (
    LEADER_QUEUE,
    WORK_CAPABILITY,
    WORK_QUEUE,
    Mailbox,
    envelope_for,
    member_queue,
)

__all__ = [
    "LEADER_QUEUE",
    "WORK_CAPABILITY",
    "WORK_QUEUE",
    "AttemptRunner",
    "Follower",
    "FollowerConfig",
    "Mailbox",
    "MemberHeartbeat",
    "Ran",
    "envelope_for",
    "member_queue",
]
