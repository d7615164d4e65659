"""A child's output read with a bound: however much it prints, a worker keeps at most
the first ``head`` bytes of stdout and the last ``tail`` bytes of stderr, and counts
the rest, so a 20 MB (or endless) output costs no more memory than a small one and
the attempt can say how large it was.
"""

from __future__ import annotations

import subprocess
import threading
from collections import deque
from dataclasses import dataclass
from typing import IO

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Captured:
    """What was kept of one stream, and how many bytes the child wrote in all."""

    text: str
    size: int

    @property
    def cut(self) -> bool:
        return self.size > len(self.text.encode("utf-8", "surrogatepass"))


class _Reader(threading.Thread):
    def __init__(self, stream: IO[bytes], head: int, tail: int) -> None:
        super().__init__(daemon=True, name="tenure-capture")
        self.stream, self.head_limit, self.tail_limit = stream, head, tail
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.size = 0

    def run(self) -> None:
        try:
            while chunk := self.stream.read(CHUNK):
                self.size += len(chunk)
                room = self.head_limit - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                if self.tail_limit:
                    self._keep_tail(chunk)
        except (OSError, ValueError):
            pass  # the pipe went away: what was read is what there is
        finally:
            self.stream.close()

    def _keep_tail(self, chunk: bytes) -> None:
        self.tail.append(chunk[-self.tail_limit :])
        self.tail_size += len(self.tail[-1])
        while self.tail_size - len(self.tail[0]) >= self.tail_limit:
            self.tail_size -= len(self.tail.popleft())

    def captured(self) -> Captured:
        kept = bytes(self.head) if self.head_limit else b"".join(self.tail)[-self.tail_limit :]
        return Captured(kept.decode("utf-8", "replace"), self.size)


class Capture:
    """A started child's streams being read: stdin fed, stdout's beginning and stderr's
    end kept (``stdout_head``, ``stderr_tail`` bytes)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], stdin: str, *, stdout_head: int, stderr_tail: int
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.readers = (_Reader(proc.stdout, stdout_head, 0), _Reader(proc.stderr, 0, stderr_tail))
        writer = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
        for thread in (*self.readers, writer):
            thread.start()

    def wait(self, timeout: float) -> None:
        """Wait for the child; ``TimeoutExpired`` if it overran (end it, then read)."""
        self.proc.wait(timeout=timeout)

    def streams(self, wait: float = 5.0) -> tuple[Captured, Captured]:
        """What was kept of stdout and stderr once the child has ended (a grandchild
        holding a pipe open is not waited for longer than ``wait`` seconds)."""
        for reader in self.readers:
            reader.join(wait)
        out, err = self.readers
        return out.captured(), err.captured()


def _feed(stream: IO[bytes], text: str) -> None:
    try:
        stream.write(text.encode("utf-8", "surrogatepass"))
        stream.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the child stopped reading (or exited): it has all it wanted
