"""What every part of the in-memory backend shares: the state, its lock, fencing, events."""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Self

from tenure.protocol.errors import ConfigError, ProtocolError, StaleEpoch
from tenure.protocol.secrets import redact_value
from tenure.store.base import Store
from tenure.store.memory.state import Clock, EventRow, Memory, TeamState, named

SCHEME = "memory://"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class MemoryBase(Store):
    """Holds the (possibly shared) state; every operation runs under its one lock."""

    distributed: ClassVar[bool] = False
    shared_across_processes: ClassVar[bool] = False

    def __init__(self, clock: Clock | None = None, *, name: str | None = None) -> None:
        if name is None:
            self.memory = Memory(clock)
        else:
            self.memory = named(check_name(name), clock)
        self.name = name
        self.url = SCHEME + (name or "")

    @classmethod
    def from_url(cls, url: str) -> Self:
        """``memory://`` is a new empty store; ``memory://NAME`` the process's store NAME."""
        if not url.startswith(SCHEME):
            raise ConfigError(
                f"store URL {url!r}: an in-memory store is memory:// or memory://NAME"
            )
        rest = url.removeprefix(SCHEME)
        return cls(name=check_name(rest, url) if rest else None)

    def now(self) -> float:
        return float(self.memory.clock())

    def close(self) -> None:
        """Nothing to release; a named store's state stays for the next ``open_store``."""

    def _atomic(self) -> AbstractContextManager[object]:
        return self.memory.lock

    # --- shared by the mixins (call with ``self.memory.lock`` held) ----------------------

    def _fence(self, team: str, epoch: int) -> None:
        current = self.memory.team(team).epoch
        if epoch < current:
            raise StaleEpoch(team, epoch, current)

    def _tie(self, team: str, holder: str, now: float) -> str | None:
        """The incarnation a hold by ``holder`` is tied to: its live one, or None when
        it is no live member (then only the plain timeout ends the hold)."""
        member = self.memory.team(team).members.get(holder)
        return member.incarnation if member is not None and member.expires_at > now else None

    def _holder_gone(self, team: str, holder: str, tie: str | None, now: float) -> bool:
        """True once a hold tied to ``tie`` outlived its holder's incarnation."""
        return tie is not None and self._tie(team, holder, now) != tie

    def _event(
        self, team: str, kind: str, data: dict[str, Any], epoch: int | None, *, at: float
    ) -> int:
        text = dumps(data)  # first: data that cannot be stored changes nothing
        memory = self.memory
        memory.event_seq += 1
        row = EventRow(memory.event_seq, team, kind, at, epoch, text)
        state: TeamState = memory.team(team)
        state.events.append(row)
        state.known = True
        memory.events.append(row)
        return row.seq


def check_name(name: str, url: str | None = None) -> str:
    if not _NAME.fullmatch(name):
        where = f"store URL {url!r}" if url else f"memory store name {name!r}"
        raise ConfigError(f"{where}: a name is letters, digits, '.', '_' or '-'")
    return name


def positive(field: str, value: float) -> None:
    if not value > 0:
        raise ProtocolError(field, f"a positive number of seconds, got {value!r}")


def dumps(value: Any) -> str:
    """``value`` as stored: JSON, with every known secret redacted (``protocol.secrets``)."""
    return json.dumps(redact_value(value), default=str, separators=(",", ":"))


def loads(text: str) -> Any:
    return json.loads(text)
