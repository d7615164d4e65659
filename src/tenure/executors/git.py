"""A thin wrapper over the ``git`` CLI; every git failure becomes a ``GitError`` with stderr.

git runs with the allowlisted environment (``executors.environment``) and git's own
identity and configuration variables (``GIT_PASSED``): a repository's hooks see no
model key and no store URL."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from tenure.executors.environment import child_env
from tenure.protocol.errors import TenureError
from tenure.protocol.private import private_dir

GIT_PASSED = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_SSL_CAINFO",
    "GIT_EXEC_PATH",
)


def git_env() -> dict[str, str]:
    """The environment every git command of Tenure's runs with."""
    return child_env(pass_names=GIT_PASSED)


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


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run ``git ARGS`` in ``cwd`` and return stdout; raise ``GitError`` when it fails."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
            env=git_env(),
        )
    except FileNotFoundError:
        raise TenureError("git is not installed or not on PATH; install git") from None
    if check and proc.returncode != 0:
        raise GitError(args, cwd, proc.returncode, proc.stderr or proc.stdout)
    return proc.stdout


def ok(cwd: Path, *args: str) -> bool:
    """True when ``git ARGS`` exits 0."""
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=git_env(),
    )
    return proc.returncode == 0


def repo_root(path: Path) -> Path:
    """The top of the working tree containing ``path``, or ``NotARepository``."""
    if not path.is_dir():
        raise NotARepository(f"{path} is not a directory; pass --repo PATH of a git repository")
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=path,
        capture_output=True,
        text=True,
        env=git_env(),
    )
    if proc.returncode != 0:
        raise NotARepository(
            f"{path} is not a git repository; run `git init` there and commit, "
            "or pass --repo PATH of one"
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


def head(cwd: Path, ref: str = "HEAD") -> str:
    return git(cwd, "rev-parse", "--verify", f"{ref}^{{commit}}").strip()


def current_branch(cwd: Path) -> str:
    return git(cwd, "rev-parse", "--abbrev-ref", "HEAD").strip()


def branch_exists(cwd: Path, branch: str) -> bool:
    return ok(cwd, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")


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
) -> bool:
    """Stage everything in ``cwd`` — or, with ``only``, just those paths, even if ignored —
    and commit it; False when there was nothing to commit."""
    if only:
        git(cwd, "add", "-A", "-f", "--", *only)
    else:
        git(cwd, "add", "-A")
    if ok(cwd, "diff", "--cached", "--quiet"):
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
    )
    return True


def changed_files(cwd: Path, base: str, tip: str = "HEAD") -> list[str]:
    """Paths changed between ``base`` and ``tip`` (renames show both sides)."""
    out = git(cwd, "diff", "--name-only", "--no-renames", f"{base}..{tip}")
    return [line for line in out.splitlines() if line]


def is_ancestor(cwd: Path, commit: str, of: str) -> bool:
    return ok(cwd, "merge-base", "--is-ancestor", commit, of)


def merge(cwd: Path, branch: str, message: str) -> tuple[bool, str]:
    """Merge ``branch`` into the checked-out branch of ``cwd`` with a merge commit.

    On conflict the merge is aborted (the tree is left as it was) and the conflicted
    paths and git's output are returned; nothing is resolved by picking a side."""
    proc = subprocess.run(
        [
            "git",
            "-c",
            "user.name=tenure",
            "-c",
            "user.email=tenure@localhost",
            "merge",
            "--no-ff",
            "--no-edit",
            "-m",
            message,
            branch,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=git_env(),
    )
    if proc.returncode == 0:
        return True, ""
    conflicted = git(cwd, "diff", "--name-only", "--diff-filter=U", check=False).split()
    detail = git(cwd, "diff", check=False)[-4000:]
    git(cwd, "merge", "--abort", check=False)
    report = (
        f"merging {branch} conflicts in: {', '.join(conflicted) or '(unknown)'}\n"
        f"{proc.stdout}{proc.stderr}\n{detail}"
    )
    return False, report
