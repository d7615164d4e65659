"""A thin wrapper over the ``git`` CLI; every git failure becomes a ``GitError`` with stderr.

Every git command Tenure runs goes through here, and none of them runs a program
the repository's configuration names: an agent that can write ``.git/config``,
``.git/hooks/`` or a worktree's files must not get the leader to run its code.
So each command gets

- the environment: no system or global config (``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_SYSTEM`` and ``GIT_CONFIG_GLOBAL`` set to ``/dev/null``), no system
  attributes (``GIT_ATTR_NOSYSTEM=1``), no prompts (``GIT_TERMINAL_PROMPT=0``),
  and no inherited ``GIT_*`` variable (``GIT_DIR``, ``GIT_CONFIG_PARAMETERS``, …);
- ``-c`` overrides (``SAFE_CONFIG``), which beat every config file: no hooks
  (``core.hooksPath=/dev/null``), no fsmonitor program (``core.fsmonitor=false``),
  no transport at all (``protocol.allow=never``: no ssh, no ``ext::``, so
  ``core.sshCommand`` and credential helpers never run), no submodule recursion,
  no signing or signature checks (``gpg.program`` never runs), no pager or
  editor, no automatic gc or maintenance, and attribute/excludes files only
  from the repository itself (``core.attributesFile=/dev/null``; the user's own
  global excludes file, read once at start, stays in force);
- ``--no-ext-diff --no-textconv`` on every diff, so ``diff.external`` and
  textconv drivers never run.

What ``-c`` cannot reach: filter, diff and merge *drivers* that the repository
config defines under names that ``.gitattributes`` or ``.git/info/attributes``
use, and ``core.worktree``. Those files are watched instead (see
``executors/containment.py``: restored before the leader's next git step), and
the leader's fresh checkouts are written blob by blob (``checkout_exact``), with
no filter at all.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tenure.executors.environment import child_env
from tenure.protocol.errors import TenureError
from tenure.protocol.private import private_dir

# -c overrides on every git command: config an agent could have written must not run code
SAFE_CONFIG: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.attributesFile=/dev/null",
    "core.pager=cat",
    "core.editor=false",
    "sequence.editor=false",
    "core.askPass=false",
    "credential.helper=",
    "protocol.allow=never",
    "submodule.recurse=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "merge.verifySignatures=false",
    "log.showSignature=false",
    "gc.auto=0",
    "maintenance.auto=false",
)
NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class GitError(TenureError):
    """A git command failed; the message names the command, the directory and git's stderr."""

    def __init__(self, args: Sequence[str], cwd: Path, code: int, stderr: str) -> None:
        self.args_ = list(args)
        self.cwd = cwd
        self.code = code
        self.stderr = stderr.strip()
        super().__init__(f"`git {' '.join(args)}` in {cwd} exited {code}: {self.stderr}")


class NotARepository(TenureError):
    """The path is not inside a git working tree."""


class DirtyWorkingTree(TenureError):
    """The repository has uncommitted changes; the message lists them."""


@dataclass(frozen=True)
class Dirs:
    """A work tree and its git directories as the leader resolved them itself.

    Git run with ``at=Dirs(...)`` gets ``GIT_DIR``, ``GIT_COMMON_DIR`` and
    ``GIT_WORK_TREE`` from here, never from the work tree's ``.git`` file or the
    ``commondir`` file next to it (both writable by an agent in its worktree)."""

    work_tree: Path
    git_dir: Path
    common_dir: Path
    index: Path | None = None  # an index of the leader's own instead of the git dir's

    def env(self) -> dict[str, str]:
        env = {
            "GIT_DIR": str(self.git_dir),
            "GIT_COMMON_DIR": str(self.common_dir),
            "GIT_WORK_TREE": str(self.work_tree),
        }
        if self.index is not None:
            env["GIT_INDEX_FILE"] = str(self.index)
        return env


@functools.cache
def user_excludes() -> str:
    """The user's own global excludes file (``core.excludesFile``, else git's default),
    read once, before any agent ran; the leader's git keeps honouring it."""
    try:
        proc = subprocess.run(
            ["git", "config", "--global", "--path", "core.excludesFile"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
            env=child_env(),  # the user's own global config, read once
        )
    except FileNotFoundError:
        return "/dev/null"
    named = proc.stdout.strip()
    if named:
        return named
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return str(Path(xdg) / "git" / "ignore")


def safe_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git command Tenure runs (see the module's docstring)."""
    # the allowlisted environment (no model key, no store URL), and no inherited GIT_*
    env = {k: v for k, v in child_env().items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_SYSTEM=os.devnull,
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
    )
    env.update(extra or {})
    return env


def safe_argv(*args: str) -> list[str]:
    """``git`` with the overrides that keep repository config from running anything."""
    overrides = [*SAFE_CONFIG, f"core.excludesFile={user_excludes()}"]
    return ["git", *(part for item in overrides for part in ("-c", item)), *args]


def _run(
    cwd: Path, args: Sequence[str], at: Dirs | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            safe_argv(*args),
            cwd=at.work_tree if at is not None else cwd,
            env=safe_env(at.env() if at is not None else None),
            capture_output=True,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise TenureError("git is not installed or not on PATH; install git") from None


def git(cwd: Path, *args: str, check: bool = True, at: Dirs | None = None) -> str:
    """Run ``git ARGS`` in ``cwd`` and return stdout; raise ``GitError`` when it fails."""
    proc = _run(cwd, args, at)
    out = proc.stdout.decode(errors="replace")
    if check and proc.returncode != 0:
        raise GitError(args, cwd, proc.returncode, proc.stderr.decode(errors="replace") or out)
    return out


def git_bytes(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """``git ARGS`` with bytes in and out (``GitError`` when it fails)."""
    proc = _run(cwd, args, stdin=stdin)
    if proc.returncode != 0:
        raise GitError(args, cwd, proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout


def ok(cwd: Path, *args: str, at: Dirs | None = None) -> bool:
    """True when ``git ARGS`` exits 0."""
    return _run(cwd, args, at).returncode == 0


def repo_root(path: Path) -> Path:
    """The top of the working tree containing ``path``, or ``NotARepository``."""
    if not path.is_dir():
        raise NotARepository(f"{path} is not a directory; pass --workdir PATH of a git repository")
    proc = subprocess.run(
        safe_argv("rev-parse", "--show-toplevel"),
        cwd=path,
        env=safe_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise NotARepository(
            f"{path} is not a git repository; run `git init` there and commit, "
            "or pass --workdir PATH of one"
        )
    return Path(proc.stdout.strip()).resolve()


def dirty_paths(root: Path) -> list[str]:
    """Uncommitted changes (tracked or untracked, ignored files excepted)."""
    out = git(root, "status", "--porcelain", "--untracked-files=all")
    return [line[3:] for line in out.splitlines() if line.strip()]


def require_clean(root: Path) -> None:
    dirty = dirty_paths(root)
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        raise DirtyWorkingTree(
            f"{root} has uncommitted changes ({shown}); commit or stash them first"
        )


def head(cwd: Path, ref: str = "HEAD", *, at: Dirs | None = None) -> str:
    return git(cwd, "rev-parse", "--verify", f"{ref}^{{commit}}", at=at).strip()


def current_branch(cwd: Path, *, at: Dirs | None = None) -> str:
    return git(cwd, "rev-parse", "--abbrev-ref", "HEAD", at=at).strip()


def branch_exists(cwd: Path, branch: str) -> bool:
    return ok(cwd, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")


def common_dir(repo: Path) -> Path:
    """The repository's shared git directory (``.git`` of the main checkout)."""
    common = Path(git(repo, "rev-parse", "--git-common-dir").strip())
    return (common if common.is_absolute() else repo / common).resolve()


def dirs_of(repo: Path, tree: Path) -> Dirs:
    """The git directories of ``repo``'s worktree at ``tree``, found from the repository's
    own side (``COMMON/worktrees/*/gitdir``), never from ``tree/.git``: the leader's
    commands in an agent's worktree go exactly where it expects."""
    common = common_dir(repo)
    tree = tree.resolve()
    if tree == repo.resolve():
        return Dirs(tree, common, common)
    admin = common / "worktrees"
    for entry in sorted(admin.iterdir()) if admin.is_dir() else []:
        try:
            points = Path((entry / "gitdir").read_text().strip())
        except OSError:
            continue
        if points.parent == tree:
            return Dirs(tree, entry.resolve(), common)
    raise TenureError(f"{tree} is not a worktree of {repo}")


def worktree_add(repo: Path, path: Path, branch: str, base: str) -> None:
    """A new worktree at ``path`` on a new branch ``branch`` starting at ``base``; the
    directory that holds it is created owner-only."""
    private_dir(path.parent)
    git(repo, "worktree", "add", "-q", "-b", branch, str(path), base)


def worktree_remove(repo: Path, path: Path) -> None:
    git(repo, "worktree", "remove", "--force", str(path))


def worktrees(repo: Path) -> dict[Path, str]:
    """Every worktree of ``repo``: path → branch (``""`` when detached)."""
    found: dict[Path, str] = {}
    current: Path | None = None
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            current = Path(line[len("worktree ") :]).resolve()
            found[current] = ""
        elif line.startswith("branch ") and current is not None:
            found[current] = line[len("branch ") :].removeprefix("refs/heads/")
    return found


def commit_all(
    cwd: Path,
    message: str,
    *,
    author: str = "tenure <tenure@localhost>",
    only: Sequence[str] = (),
    at: Dirs | None = None,
) -> bool:
    """Stage everything in ``cwd`` — or, with ``only``, just those paths, even if ignored —
    and commit it; False when there was nothing to commit."""
    if only:
        git(cwd, "add", "-A", "-f", "--", *only, at=at)
    else:
        git(cwd, "add", "-A", at=at)
    if ok(cwd, "diff", "--cached", "--quiet", *NO_DIFF_PROGRAMS, at=at):
        return False
    name, _, email = author.partition(" <")
    git(
        cwd,
        "-c",
        f"user.name={name}",
        "-c",
        f"user.email={email.rstrip('>')}",
        "commit",
        "-q",
        "--no-verify",
        "-m",
        message,
        at=at,
    )
    return True


def commit_onto(
    repo: Path,
    work_tree: Path,
    branch: str,
    message: str,
    *,
    author: str = "tenure <tenure@localhost>",
) -> bool:
    """Commit everything in ``work_tree`` onto ``branch`` of ``repo``, with the branch's
    tip as parent; False when there was nothing to commit.

    Nothing of the work tree's own git state is used: not its ``HEAD`` (an agent can
    point it at any branch, ``main`` included), not its index (``--skip-worktree``,
    ``--assume-unchanged`` entries would hide changes), not its ``config.worktree``.
    The commit is made with the repository's own git directory and a fresh index
    of the branch's tip, brought up to the files with ``add -A``."""
    root = common_dir(repo)
    ref = f"refs/heads/{branch}"
    parent = head(root, ref)
    with tempfile.TemporaryDirectory(prefix="tenure-index-") as scratch:
        own = Dirs(work_tree.resolve(), root, root, index=Path(scratch) / "index")
        git(work_tree, "read-tree", parent, at=own)
        git(work_tree, "add", "-A", at=own)
        tree = git(work_tree, "write-tree", at=own).strip()
    if tree == git(root, "rev-parse", f"{parent}^{{tree}}").strip():
        return False
    name, _, email = author.partition(" <")
    identity = ["-c", f"user.name={name}", "-c", f"user.email={email.rstrip('>')}"]
    commit = git(root, *identity, "commit-tree", tree, "-p", parent, "-m", message).strip()
    git(root, "update-ref", "-m", f"tenure: {message.splitlines()[0]}", ref, commit, parent)
    return True


def changed_files(cwd: Path, base: str, tip: str = "HEAD") -> list[str]:
    """Paths changed between ``base`` and ``tip`` (renames show both sides)."""
    out = git(cwd, "diff", "--name-only", "--no-renames", *NO_DIFF_PROGRAMS, f"{base}..{tip}")
    return [line for line in out.splitlines() if line]


def is_ancestor(cwd: Path, commit: str, of: str) -> bool:
    return ok(cwd, "merge-base", "--is-ancestor", commit, of)


# --- a commit's tree, read from the object store ------------------------------------------

LINK_MODE = "120000"
GITLINK_MODE = "160000"


@dataclass(frozen=True)
class Entry:
    """One path of a commit's tree: its mode (``100644``, ``100755``, ``120000`` for a
    symbolic link, ``160000`` for a submodule) and object id."""

    mode: str
    oid: str


def tree_entries(repo: Path, commit: str) -> dict[str, Entry]:
    """Every path in ``commit``'s tree, recursively."""
    raw = git_bytes(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    found: dict[str, Entry] = {}
    for item in raw.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, _kind, oid = meta.decode().split(" ")
        found[path.decode(errors="surrogateescape")] = Entry(mode, oid)
    return found


def blobs(repo: Path, oids: Sequence[str]) -> dict[str, bytes]:
    """The contents of the blobs ``oids`` (one ``cat-file --batch`` for all of them)."""
    wanted = list(dict.fromkeys(oids))
    if not wanted:
        return {}
    raw = git_bytes(repo, "cat-file", "--batch", stdin="".join(f"{o}\n" for o in wanted).encode())
    found: dict[str, bytes] = {}
    at = 0
    for oid in wanted:
        end = raw.index(b"\n", at)
        header = raw[at:end].decode().split()
        if len(header) < 3:
            raise TenureError(f"git cat-file: no object {oid}")
        size = int(header[2])
        found[oid] = raw[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return found


def checkout_exact(repo: Path, commit: str, path: Path) -> Path:
    """A fresh detached worktree of ``commit`` at ``path``, written blob by blob from the
    object store: exactly the commit's bytes (no filter, end-of-line or encoding
    conversion, no hook), with an index that matches it, and nothing else — none of
    an agent's untracked, ignored or excluded files. Remove it with ``drop_checkout``."""
    drop_checkout(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "-q", "--detach", "--no-checkout", str(path), commit)
    at = dirs_of(repo, path)
    git(repo, "read-tree", commit, at=at)
    entries = tree_entries(repo, commit)
    contents = blobs(repo, [e.oid for e in entries.values() if e.mode != GITLINK_MODE])
    top = path.resolve()
    for rel, entry in sorted(entries.items()):
        target = top / rel
        if not target.resolve().parent.is_relative_to(top):
            raise TenureError(f"{commit}: {rel!r} would be written outside the checkout")
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.mode == GITLINK_MODE:
            target.mkdir(exist_ok=True)
        elif entry.mode == LINK_MODE:
            os.symlink(contents[entry.oid], target)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(contents[entry.oid])
            if entry.mode == "100755":
                target.chmod(0o755)
    return path


def drop_checkout(repo: Path, path: Path) -> None:
    """Remove a worktree made by ``checkout_exact`` (and whatever the checks left in it)."""
    if (path / ".git").is_file():
        git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)


def merge(cwd: Path, commit: str, message: str, *, name: str | None = None) -> tuple[bool, str]:
    """Merge ``commit`` (called ``name`` in reports) into the checked-out branch of ``cwd``
    with a merge commit.

    On conflict the merge is aborted (the tree is left as it was) and the conflicted
    paths and git's output are returned; nothing is resolved by picking a side."""
    proc = _run(
        cwd,
        [
            "-c",
            "user.name=tenure",
            "-c",
            "user.email=tenure@localhost",
            "merge",
            "--no-ff",
            "--no-edit",
            "--no-verify",
            "-m",
            message,
            commit,
        ],
    )
    if proc.returncode == 0:
        return True, ""
    conflicted = git(cwd, "diff", "--name-only", "--diff-filter=U", check=False).split()
    detail = git(cwd, "diff", *NO_DIFF_PROGRAMS, check=False)[-4000:]
    git(cwd, "merge", "--abort", check=False)
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    report = (
        f"merging {name or commit} conflicts in: {', '.join(conflicted) or '(unknown)'}\n"
        f"{output}\n{detail}"
    )
    return False, report
