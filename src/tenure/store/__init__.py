"""The state every member shares: leases, members, tasks, effects, messages, events."""

from tenure.store.base import DEFAULT_MAX_DELIVERIES, UNSET, Store
from tenure.store.clock import ManualClock
from tenure.store.records import (
    ALLOWED_TRANSITIONS,
    TASK_STATES,
    TERMINAL_STATES,
    Delivery,
    EffectTicket,
    Event,
    Lease,
    Member,
    TaskRecord,
    TaskState,
)
from tenure.store.rules import check_cas, check_epoch, new_lease_token, next_epoch
from tenure.store.url import DEFAULT_URL, default_url, open_store

__all__ = [
    "ALLOWED_TRANSITIONS",
    "DEFAULT_MAX_DELIVERIES",
    "DEFAULT_URL",
    "TASK_STATES",
    "TERMINAL_STATES",
    "UNSET",
    "Delivery",
    "EffectTicket",
    "Event",
    "Lease",
    "ManualClock",
    "Member",
    "Store",
    "TaskRecord",
    "TaskState",
    "check_cas",
    "check_epoch",
    "default_url",
    "new_lease_token",
    "next_epoch",
    "open_store",
]
