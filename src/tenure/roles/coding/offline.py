"""The leader's side of a coding run while no leader runs it: a replan applied from
the command line first settles what a killed leader left (attempts it had in flight,
files behind the register) through the run's hooks, as a leader would.

``OfflineLead`` is the leader those hooks see: the run's register and event log,
fenced by the run's lease, and the leader's judgement (retry, block, fail) by the
same reviewer every leader has. It has no workers and sends nothing: what it queues
is sent by the next leader that resumes the run.
"""

from __future__ import annotations

from typing import Any

from tenure.coord import Credentials
from tenure.protocol.taskspec import AttemptData
from tenure.roles.coding.run import RunPlace
from tenure.roles.leader import Hooks, Judging, LeaderHook, Reviewer
from tenure.roles.register import Task
from tenure.store import Member
from tenure.verify import Trust

__all__ = ["OfflineLead"]


class OfflineLead(Judging):
    """A coding run's register and judgement, for its hooks, with no leader running."""

    def __init__(self, place: RunPlace, me: str, hooks: list[LeaderHook]) -> None:
        self.place = place
        self.store = place.store
        self.team = place.team
        self.me = me
        self.register = place.register
        self.trust = Trust()
        self.workdir = place.int_path
        self.credentials: Credentials | None = None
        self.hooks = Hooks(hooks)
        self.reviewer = Reviewer(self, self.hooks)

    def settle(self) -> None:
        """What a new leader does first: attempts left in flight are taken over by the
        hooks, and the hooks' round brings the run's files in line with the register."""
        for task in self.register.tasks():
            if task.state == "running" or (task.state == "queued" and task.assignee):
                self.hooks.on_takeover(self, task)
        self.hooks.on_tick(self, self.register.tasks())

    def epoch(self) -> int:
        return self.place.epoch()

    def now(self) -> float:
        return self.store.now()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append_event(self.team, kind, {"leader": self.me, **data}, epoch=self.epoch())

    def tasks(self) -> list[Task]:
        return self.register.tasks()

    def workers(self) -> dict[str, Member]:
        return {}  # no worker runs while no leader does

    def dispatch(self, task: Task, worker: str, data: AttemptData | None = None) -> bool:
        return False  # nothing is sent: the next leader dispatches it

    def send(self, task: Task) -> None:
        return None  # likewise
