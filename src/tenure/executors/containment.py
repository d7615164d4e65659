"""What a coding agent may not change, watched by the leader: the repository's git
metadata, the user's checkout and the run's integration worktree.

``Guard`` takes a baseline when the run opens, before any agent runs:

- **git metadata** (in the common git directory): ``config``, ``config.worktree``,
  ``hooks/`` and ``info/`` (``exclude``, ``attributes``, …) byte for byte, and the
  user's global excludes file;
- **the user's refs**: every branch but Tenure's own (``refs/heads/tenure/``),
  every tag, and the checkout's ``HEAD``;
- **the user's checkout**: every file and directory outside ``.git`` and
  ``.tenure``, tracked or not, except what git ignored at the baseline (a
  virtualenv, build output), by ``lstat`` (type, mode, size, mtime, ctime,
  inode: a process cannot set a ctime back). Refs and checkout are watched
  throughout when agents run unsandboxed (``continuous``); when they are
  sandboxed they cannot reach them, and only the leader's checks (which run the
  agent's code) are watched: ``open()`` re-takes their baseline, ``close()``
  compares;
- **the integration worktree**: ``git status --ignored`` (only the leader writes
  there, and it leaves it clean after every step).

``inspect()`` compares the present with the baseline; every difference is a
*finding*, kept with the time it was seen, and is undone at once: git metadata
is written back from the baseline, a moved ref is put back (one the agent made
is kept under ``refs/tenure-quarantine/``), a new file or directory is moved into the
quarantine directory (nothing is deleted), a changed tracked file is copied
there and restored from the baseline commit. ``since(t)`` lists what was found
since ``t``: the leader rejects every attempt that was running when something
was found (several running side by side cannot be told apart without a
sandbox; each is rejected, none merged).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tenure.executors import git
from tenure.protocol.errors import TenureError

GIT_META = ("config", "config.worktree", "hooks", "info")
META_FILE_LIMIT = 4 << 20
SKIPPED = (".git", ".tenure")


class UnsafeFile(TenureError):
    """A file the leader was to read is a symbolic link, or not a regular file."""


# --- reading what an agent wrote, without following links ---------------------------------


def read_beneath(root: Path, rel: Path | str, limit: int) -> str:
    """``root/rel`` read without following a symbolic link at or below ``root`` (each
    component opened with ``O_NOFOLLOW``), only if it is a regular file; at most
    ``limit`` bytes. ``FileNotFoundError`` when it does not exist; ``UnsafeFile``
    naming the link (and where it points) otherwise."""
    parts = PurePosixPath(rel).parts
    if not parts or any(p in ("..", "/") for p in parts):
        raise UnsafeFile(f"{rel}: not a path inside {root}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            flags |= os.O_NONBLOCK if last else os.O_DIRECTORY
            try:
                inner = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    shown = "/".join(parts[: index + 1])
                    raise UnsafeFile(_unsafe(fd, part, shown)) from None
                raise
            os.close(fd)
            fd = inner
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFile(f"{'/'.join(parts)} is not a regular file; not read")
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(fd)


def _unsafe(dir_fd: int, name: str, shown: str) -> str:
    try:
        target = os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return f"{shown} is not a regular file or directory; not followed"
    return f"{shown} is a symbolic link (to {target}); the leader does not follow links"


def open_append(path: Path) -> int:
    """A file descriptor appending to ``path``, created if missing, never through a link."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def _discard(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


# --- the baseline and the watch ------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One path as the guard saw it."""

    kind: str  # file, dir, link, other
    mode: int
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    ino: int = 0
    data: bytes | None = None  # git metadata: the bytes (a link: its target)

    def same(self, other: Seen) -> bool:
        if self.kind != other.kind or stat.S_IMODE(self.mode) != stat.S_IMODE(other.mode):
            return False
        if self.kind == "dir":
            return True
        if self.data is not None or other.data is not None:
            return self.data == other.data
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino) == (
            other.size,
            other.mtime_ns,
            other.ctime_ns,
            other.ino,
        )


def _seen(path: Path, *, keep: bool) -> Seen | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        kind = "link"
        data: bytes | None = os.readlink(path).encode() if keep else None
    elif stat.S_ISDIR(st.st_mode):
        kind, data = "dir", None
    elif stat.S_ISREG(st.st_mode):
        kind = "file"
        data = path.read_bytes()[:META_FILE_LIMIT] if keep else None
    else:
        kind, data = "other", b"" if keep else None
    stamps = (0, 0, 0, 0) if keep else (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return Seen(kind, st.st_mode, *stamps, data=data)


@dataclass(frozen=True)
class Finding:
    at: float  # time.monotonic() when it was seen
    what: tuple[str, ...]


class Guard:
    """The baseline of what agents may not change, and the findings since (thread-safe:
    the workers inspect after each agent, the leader before and after its checks)."""

    def __init__(
        self,
        root: Path,
        *,
        quarantine: Path,
        integration: Path | None = None,
        continuous: bool = True,
    ) -> None:
        self.root = root.resolve()
        self.common = git.common_dir(self.root)
        self.quarantine = quarantine
        self.integration = integration
        # unsandboxed agents can reach the user's refs and checkout at any time: they are
        # watched throughout; sandboxed ones cannot, so only across the leader's checks
        # (the agent's code runs there), re-baselined when those start (``open``)
        self.continuous = continuous
        self._open = continuous
        self.findings: list[Finding] = []
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._moved = 0
        excludes = Path(git.user_excludes())
        self.meta_roots = [("git", self.common / name) for name in GIT_META]
        if excludes.is_absolute():
            self.meta_roots.append(("excludes", excludes))
        self.base_meta = self._meta()
        self.base_integration = self._integration_status()
        self._checkout_baseline()

    def _checkout_baseline(self) -> None:
        self.base_head = git.head(self.root) if git.ok(self.root, "rev-parse", "HEAD") else ""
        self.base_clean = self._clean_tracked()
        self.base_refs = self._refs()
        self.ignored = self._ignored()
        self.base_tree = self._tree()

    def open(self) -> None:
        """The leader's checks start (the agent's code runs in them): from now, the
        user's refs and checkout are compared too — against now, in a sandboxed run."""
        with self._lock:
            if not self.continuous:
                self._checkout_baseline()
                self._open = True

    def close(self) -> list[str]:
        """The checks are done: a full look (its findings recorded), then, in a
        sandboxed run, the user's refs and checkout are left alone again."""
        changes = self.inspect()
        with self._lock:
            self._open = self.continuous
        return changes

    # --- what the agents may not change ----------------------------------------------

    def _meta(self) -> dict[str, Seen]:
        found: dict[str, Seen] = {}
        for area, top in self.meta_roots:
            for path in _walk(top):
                seen = _seen(path, keep=True)
                if seen is not None:
                    found[f"{area}:{path}"] = seen
        return found

    def _clean_tracked(self) -> set[str]:
        """Tracked paths that matched HEAD at the baseline: these can be restored."""
        if not self.base_head:
            return set()
        tracked = git.git(self.root, "ls-files", "-z").split("\0")
        dirty = set(git.dirty_paths(self.root))
        return {p for p in tracked if p and p not in dirty}

    def _refs(self) -> dict[str, str]:
        out = git.git(
            self.root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags"
        )
        found = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        found = {k: v for k, v in found.items() if not k.startswith("refs/heads/tenure/")}
        symbolic = git.git(self.root, "symbolic-ref", "-q", "HEAD", check=False).strip()
        found["HEAD"] = symbolic or git.git(self.root, "rev-parse", "HEAD", check=False).strip()
        return found

    def _fix_refs(self) -> list[str]:
        now = self._refs()
        changes: list[str] = []
        for name in sorted(set(now) | set(self.base_refs)):
            before, after = self.base_refs.get(name), now.get(name)
            if before == after:
                continue
            if name == "HEAD":
                changes.append(f"moved HEAD of the checkout from {before} to {after}")
                if before and before.startswith("refs/"):
                    git.git(self.root, "symbolic-ref", "HEAD", before)
                elif before:
                    git.git(self.root, "update-ref", "--no-deref", "HEAD", before)
            elif before is None:
                assert after is not None
                kept = "refs/tenure-quarantine/" + name.removeprefix("refs/")
                changes.append(f"added {name} at {after[:12]} (kept as {kept})")
                git.git(self.root, "update-ref", kept, after)
                git.git(self.root, "update-ref", "-d", name, after)
            else:
                shown = after[:12] if after else "nothing"
                kept = ""
                if after:
                    kept = "refs/tenure-quarantine/" + name.removeprefix("refs/")
                    git.git(self.root, "update-ref", kept, after)
                    kept = f"; {shown} kept as {kept}"
                changes.append(f"moved {name} from {before[:12]} to {shown} (put back{kept})")
                git.git(self.root, "update-ref", name, before)
        return changes

    def _ignored(self) -> set[str]:
        out = git.git(
            self.root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
        )
        return {p.rstrip("/") for p in out.split("\0") if p}

    def _tree(self) -> dict[str, Seen]:
        found: dict[str, Seen] = {}
        stack = [""]
        while stack:
            rel = stack.pop()
            here = self.root / rel if rel else self.root
            try:
                names = sorted(os.listdir(here))
            except (NotADirectoryError, FileNotFoundError, PermissionError):
                continue
            for name in names:
                child = f"{rel}/{name}" if rel else name
                if (not rel and name in SKIPPED) or child in self.ignored:
                    continue
                seen = _seen(self.root / child, keep=False)
                if seen is None:
                    continue
                found[child] = seen
                if seen.kind == "dir":
                    stack.append(child)
        return found

    def _integration_status(self) -> str:
        if self.integration is None or not self.integration.is_dir():
            return ""
        return git.git(
            self.integration, "status", "--porcelain", "-z", "--untracked-files=all", "--ignored"
        )

    # --- the watch ----------------------------------------------------------------------

    def clock(self) -> float:
        return time.monotonic()

    def inspect(self, *, full: bool = True, integration: bool = True) -> list[str]:
        """What differs from the baseline now (each undone at once and kept as a
        finding); ``full=False`` looks at the git metadata only (cheap). The
        integration worktree is looked at only from the leader's own thread, between
        its steps (``integration=False`` elsewhere: a step may be half written)."""
        with self._lock:
            changes = self._fix_meta()
            if full and self._open:
                changes += self._fix_refs()
                changes += self._fix_tree()
            if full and integration:
                changes += self._fix_integration()
            if changes:
                self.findings.append(Finding(time.monotonic(), tuple(changes)))
            return changes

    def after_agent(self) -> None:
        """A worker's look once its agent is gone, before it commits anything."""
        self.inspect(integration=False)

    def since(self, at: float) -> list[str]:
        """Everything found at or after ``at`` (``time.monotonic()``)."""
        with self._lock:
            return [w for f in self.findings if f.at >= at for w in f.what]

    def _fix_meta(self) -> list[str]:
        now = self._meta()
        changes: list[str] = []
        for key in sorted(set(now) | set(self.base_meta)):
            before, after = self.base_meta.get(key), now.get(key)
            if before is not None and after is not None and before.same(after):
                continue
            area, _, name = key.partition(":")
            path = Path(name)
            shown = self._shown(area, path)
            if before is None:
                assert after is not None
                if not path.exists() and not path.is_symlink():
                    continue  # inside a directory moved away already
                changes.append(f"added {shown}{_detail(None, after)}")
                self._move_away(path, area)
            else:
                verb = "removed" if after is None else "changed"
                changes.append(f"{verb} {shown}{_detail(before, after)}")
                self._put_back(path, before, area)
        return changes

    def _shown(self, area: str, path: Path) -> str:
        if area == "git":
            return ".git/" + str(path.relative_to(self.common))
        return f"{path} (the global excludes file)"

    def _put_back(self, path: Path, before: Seen, area: str) -> None:
        if path.exists() or path.is_symlink():
            if before.kind == "dir" and path.is_dir() and not path.is_symlink():
                path.chmod(stat.S_IMODE(before.mode))
                return
            self._move_away(path, area)
        path.parent.mkdir(parents=True, exist_ok=True)
        if before.kind == "dir":
            path.mkdir()
            path.chmod(stat.S_IMODE(before.mode))
        elif before.kind == "link":
            os.symlink((before.data or b"").decode(), path)
        elif before.kind == "file":
            spare = path.with_name(f".{path.name}.tenure-restore")
            with contextlib.suppress(FileNotFoundError):
                spare.unlink()
            fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(before.data or b"")
            spare.chmod(stat.S_IMODE(before.mode))
            os.replace(spare, path)

    def _move_away(self, path: Path, area: str) -> None:
        """Into the quarantine directory (nothing is deleted); the same path inside it."""
        self._moved += 1
        if area == "git":
            rel = Path("git") / path.relative_to(self.common)
        elif area == "checkout":
            rel = Path("checkout") / path.relative_to(self.root)
        elif area == "integration" and self.integration is not None:
            rel = Path("integration") / path.relative_to(self.integration)
        else:
            rel = Path(area) / path.name
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.quarantine / f"{stamp}-{os.getpid()}-{self._moved}" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(path, target)
        except OSError:
            if path.is_dir() and not path.is_symlink():
                shutil.copytree(path, target, symlinks=True)
            else:
                shutil.copy2(path, target, follow_symlinks=False)
            _discard(path)

    def _fix_tree(self) -> list[str]:
        now = self._tree()
        changes: list[str] = []
        restore: list[str] = []
        gone: set[str] = set()
        for rel in sorted(set(now) | set(self.base_tree)):
            if any(rel.startswith(g + "/") for g in gone):
                continue
            before, after = self.base_tree.get(rel), now.get(rel)
            if before is not None and after is not None and before.same(after):
                continue
            if before is None:
                changes.append(f"added {rel} in the checkout{_kind(after)}")
                self._move_away(self.root / rel, "checkout")
                gone.add(rel)
                continue
            if before.kind == "dir" and after is not None and after.kind == "dir":
                continue  # a mode change only; its entries are compared one by one
            verb = "removed" if after is None else "changed"
            if rel in self.base_clean:
                changes.append(f"{verb} {rel} in the checkout (restored from {self.base_head[:12]})")
                if after is not None:
                    self._move_away(self.root / rel, "checkout")
                    gone.add(rel)
                restore.append(rel)
            elif before.kind == "dir":
                changes.append(f"{verb} the directory {rel} in the checkout")
            else:
                changes.append(f"{verb} {rel} in the checkout (not tracked: left as it is)")
        if restore:
            git.git(self.root, "checkout", "-q", self.base_head, "--", *restore)
        if changes:
            self.base_tree = self._tree()
        return changes

    def _fix_integration(self) -> list[str]:
        tree = self.integration
        if tree is None or not tree.is_dir():
            return []
        now = self._integration_status()
        if now == self.base_integration:
            return []
        was = set(self.base_integration.split("\0"))
        changes: list[str] = []
        restore: list[str] = []
        for item in now.split("\0"):
            if not item or item in was or len(item) < 4:
                continue
            code, rel = item[:2], item[3:]
            changes.append(f"{'added' if code in ('??', '!!') else 'changed'} {rel} in the integration worktree")
            path = tree / rel
            if path.exists() or path.is_symlink():
                self._move_away(path, "integration")
            if code not in ("??", "!!"):
                restore.append(rel)
        if restore:
            git.git(tree, "checkout", "-q", "HEAD", "--", *restore, check=False)
        return changes


def _walk(top: Path) -> Iterator[Path]:
    """``top`` and, if it is a directory (not a link), everything below it."""
    if not top.exists() and not top.is_symlink():
        return
    yield top
    if top.is_dir() and not top.is_symlink():
        for entry in sorted(top.iterdir()):
            yield from _walk(entry)


def _detail(before: Seen | None, after: Seen | None) -> str:
    """What a changed file of the git metadata now says that it did not (a few lines)."""
    if after is None or after.data is None:
        return ""
    text = after.data.decode(errors="replace")
    if after.kind == "link":
        return f" (a link to {text})"
    if before is None or before.data is None or after.kind != "file":
        return ""
    old = {line.strip() for line in before.data.decode(errors="replace").splitlines()}
    new = [line.strip() for line in text.splitlines() if line.strip() and line.strip() not in old]
    return f": {'; '.join(new[:3])[:200]}" if new else ""


def _kind(seen: Seen | None) -> str:
    if seen is None:
        return ""
    return {"dir": " (a directory)", "link": " (a symbolic link)"}.get(seen.kind, "")
