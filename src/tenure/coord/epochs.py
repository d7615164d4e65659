"""A member's memory of the highest epoch it has seen, kept on local disk.

The store refuses stale writes, and followers refuse stale envelopes too —
both, always. This file is what makes the second hold after a restart and
after the store itself lost its epoch counter. The file is ``0600`` and the
directories made for it ``0700`` (``members/`` under the state directory included).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

from tenure.protocol.errors import ConfigError
from tenure.protocol.ids import check_task_id, check_team
from tenure.protocol.private import DIR_MODE, FILE_MODE, private_dir, tighten


class EpochMemory:
    """Highest epoch seen by one member of one team, persisted atomically."""

    def __init__(self, path: Path | None, *, root: Path | None = None) -> None:
        self.path = path
        self.root = root  # Tenure's own directory above the file, tightened on save
        self._lock = threading.Lock()
        self._highest = self._load()

    @classmethod
    def for_member(cls, state_dir: Path | None, team: str, member: str) -> EpochMemory:
        """``STATE_DIR/members/<team path>/<member>.epoch.json``: the team and member are
        checked first, so the file is always inside ``state_dir``."""
        check_team(team)
        if state_dir is None:
            return cls(None)
        check_task_id(member, "member_id")  # it names the file
        root = state_dir / "members"
        return cls(root.joinpath(*team.split("/"), f"{member}.epoch.json"), root=root)

    @property
    def highest(self) -> int:
        return self._highest

    def admits(self, epoch: int) -> bool:
        """True if ``epoch`` is not older than the highest seen."""
        return epoch >= self._highest

    def observe(self, epoch: int) -> bool:
        """Record ``epoch``; False (and nothing recorded) if it is stale."""
        with self._lock:
            if epoch < self._highest:
                return False
            if epoch > self._highest:
                self._highest = epoch
                self._save(epoch)
            return True

    def _load(self) -> int:
        if self.path is None or not self.path.exists():
            return 0
        tighten(self.path, FILE_MODE)
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))["highest_epoch"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{self.path}: unreadable epoch memory ({exc}); restore it or delete it knowingly"
            ) from exc
        return int(value)

    def _save(self, epoch: int) -> None:
        if self.path is None:
            return
        if self.root is not None:
            private_dir(self.root)
            for each in self.path.parent.relative_to(self.root).parents:
                tighten(self.root / each, DIR_MODE)
        private_dir(self.path.parent)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".epoch-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"highest_epoch": epoch}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
