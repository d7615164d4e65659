"""The in-memory backend: one process, nothing persists (``memory://`` or ``memory://NAME``).

For tests and one-process use. ``MemoryStore(clock=ManualClock())`` moves time by
hand; ``forget(NAME)`` drops a named store.
"""

from tenure.store.memory.backend import MemoryStore
from tenure.store.memory.state import forget

__all__ = ["MemoryStore", "forget"]
