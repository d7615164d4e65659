"""The leader's git runs nothing a repository's config names; files are read without
following links; the guard sees, undoes and reports changes to .git and the checkout;
symbolic links are resolved through the commit's own tree; the sandbox's layout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tenure.executors import git
from tenure.executors.containment import Guard, UnsafeFile, read_beneath
from tenure.executors.sandbox import Layout
from tenure.roles.coding.integration import _leaves


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    sh(root, "config", "user.name", "test")
    sh(root, "config", "user.email", "test@example.com")
    (root / "a.txt").write_text("one\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-q", "-m", "initial")
    return root


def plant(repo: Path, marker: Path) -> None:
    """Everything a repository's config and hooks can make git run, writing ``marker``."""
    script = repo.parent / "planted.sh"
    script.write_text(f'#!/bin/sh\necho "ran: $0 $*" >> {marker}\ncat\n')
    script.chmod(0o755)
    for hook in ("pre-commit", "post-commit", "post-checkout", "post-merge", "commit-msg",
                 "reference-transaction", "pre-merge-commit", "prepare-commit-msg"):
        (repo / ".git/hooks" / hook).write_text(script.read_text())
        (repo / ".git/hooks" / hook).chmod(0o755)
    for key, value in (
        ("core.fsmonitor", str(script)),
        ("diff.external", str(script)),
        ("core.pager", str(script)),
        ("commit.gpgSign", "true"),
        ("gpg.program", str(script)),
        ("diff.evil.textconv", str(script)),
        ("core.sshCommand", str(script)),
    ):
        sh(repo, "config", key, value)


def test_the_leaders_git_runs_no_hook_fsmonitor_diff_or_signing_program(
    repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    sh(repo, "checkout", "-q", "-b", "side")
    (repo / "a.txt").write_text("two\n")
    sh(repo, "commit", "-qam", "side")
    sh(repo, "checkout", "-q", "main")
    plant(repo, marker)
    (repo / ".gitattributes").write_text("* diff=evil\n")
    (repo / "b.txt").write_text("new\n")
    assert git.commit_all(repo, "commit through every hook")
    assert git.changed_files(repo, "HEAD~1", "HEAD") == [".gitattributes", "b.txt"]
    git.git(repo, "diff", *git.NO_DIFF_PROGRAMS, "HEAD~1")
    git.dirty_paths(repo)
    merged, report = git.merge(repo, "side", "merge side")
    assert merged, report
    assert not marker.exists(), marker.read_text()
    sh(repo, "status")  # the user's own git does run them: the plant is real
    assert marker.exists()


def test_an_exact_checkout_has_the_commits_bytes_and_nothing_else(
    repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    (repo / ".gitattributes").write_text("*.txt filter=evil eol=crlf\n")
    (repo / "tool.sh").write_text("#!/bin/sh\n")
    (repo / "tool.sh").chmod(0o755)
    (repo / "sub").mkdir()
    (repo / "sub/b.txt").write_text("line\n")
    os.symlink("../a.txt", repo / "sub/link")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", "more")
    plant(repo, marker)
    sh(repo, "config", "filter.evil.smudge", str(repo.parent / "planted.sh"))
    (repo / "untracked.txt").write_text("not in the commit\n")
    commit = git.head(repo)
    out = git.checkout_exact(repo, commit, tmp_path / "checkout")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if ".git" not in p.parts) == [
        ".gitattributes", "a.txt", "sub", "sub/b.txt", "sub/link", "tool.sh"
    ]
    assert (out / "sub/b.txt").read_bytes() == b"line\n"  # no smudge filter, no CRLF
    assert os.readlink(out / "sub/link") == "../a.txt"
    assert os.access(out / "tool.sh", os.X_OK)
    assert git.head(out) == commit
    assert not marker.exists()
    git.drop_checkout(repo, out)
    assert not out.exists() and str(out) not in sh(repo, "worktree", "list")


def test_a_file_is_read_without_following_links(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d/report.md").write_text("fine\n")
    assert read_beneath(tmp_path, "d/report.md", 100) == "fine\n"
    (tmp_path / "secret").write_text("secret\n")
    (tmp_path / "d/link.md").symlink_to(tmp_path / "secret")
    with pytest.raises(UnsafeFile, match=r"d/link.md is a symbolic link \(to .*secret\)"):
        read_beneath(tmp_path, "d/link.md", 100)
    (tmp_path / "e").symlink_to(tmp_path / "d")  # a link further up the path
    with pytest.raises(UnsafeFile, match="e is a symbolic link"):
        read_beneath(tmp_path, "e/report.md", 100)
    os.mkfifo(tmp_path / "d/fifo")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_beneath(tmp_path, "d/fifo", 100)
    with pytest.raises(FileNotFoundError):
        read_beneath(tmp_path, "d/missing.md", 100)
    assert read_beneath(tmp_path, "d/report.md", 2) == "fi"


def test_the_guard_finds_undoes_and_reports_changes(repo: Path, tmp_path: Path) -> None:
    config = (repo / ".git/config").read_bytes()
    guard = Guard(repo, quarantine=tmp_path / "quarantine")
    assert guard.inspect() == []
    at = guard.clock()
    sh(repo, "config", "core.fsmonitor", "/tmp/x.sh")
    (repo / ".git/hooks/pre-commit").write_text("#!/bin/sh\n")
    with (repo / ".git/info/exclude").open("a") as fh:
        fh.write("/hidden/\n")
    (repo / "a.txt").write_text("changed by an agent\n")
    (repo / "new.py").write_text("planted\n")
    changes = guard.inspect()
    assert "changed .git/config: fsmonitor = /tmp/x.sh" in changes
    assert "added .git/hooks/pre-commit" in changes
    assert "changed .git/info/exclude: /hidden/" in changes
    assert any(c.startswith("changed a.txt in the checkout (restored") for c in changes)
    assert "added new.py in the checkout" in changes
    assert (repo / ".git/config").read_bytes() == config
    assert not (repo / ".git/hooks/pre-commit").exists()
    assert (repo / "a.txt").read_text() == "one\n" and not (repo / "new.py").exists()
    kept = {p.name for p in (tmp_path / "quarantine").rglob("*") if p.is_file()}
    assert {"pre-commit", "new.py", "a.txt"} <= kept  # moved away, not deleted
    assert guard.since(at) == changes and guard.since(guard.clock()) == []
    assert guard.inspect() == []


def test_the_guard_puts_the_users_refs_back(repo: Path, tmp_path: Path) -> None:
    main = sh(repo, "rev-parse", "main").strip()
    sh(repo, "branch", "tenure/r1/t1/1")  # Tenure's own branches are not watched
    guard = Guard(repo, quarantine=tmp_path / "quarantine")
    sh(repo, "branch", "tenure/r1/t1/2")
    assert guard.inspect() == []
    tree = sh(repo, "write-tree").strip()
    evil = subprocess.run(
        ["git", "commit-tree", tree, "-p", main, "-m", "evil"],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout.strip()
    sh(repo, "update-ref", "refs/heads/main", evil)
    sh(repo, "tag", "v1", evil)
    changes = guard.inspect()
    kept = f"{evil[:12]} kept as refs/tenure-quarantine/heads/main"
    assert f"moved refs/heads/main from {main[:12]} to {evil[:12]} (put back; {kept})" in changes
    assert any(c.startswith("added refs/tags/v1") for c in changes)
    assert sh(repo, "rev-parse", "main").strip() == main
    assert sh(repo, "tag").strip() == ""
    assert sh(repo, "rev-parse", "refs/tenure-quarantine/tags/v1").strip() == evil  # kept


def test_links_are_resolved_through_the_tree() -> None:
    targets = {
        "ok": "a.txt",
        "up": "../etc/passwd",
        "abs": "/etc/passwd",
        "d/in": "../a.txt",
        "vendor": "/opt/vendor",
        "via": "vendor/secret",
        "loop": "loop",
        "gitdir": ".git/config",
        "d/sneaky": "../d/../../x",
    }
    leaving = {name for name in targets if _leaves(name, targets)}
    assert leaving == {"up", "abs", "vendor", "via", "loop", "gitdir", "d/sneaky"}


def test_the_sandbox_layout_puts_the_repository_back_read_only_over_a_shared_home(
    tmp_path: Path,
) -> None:
    home, repo = tmp_path / "home", tmp_path / "home/src/repo"
    tree = repo / ".tenure/worktrees/r/t-1"
    argv = Layout(tree, [tree], protect=[repo], shared_home=home).argv(["agent", "--go"])
    joined = " ".join(argv)
    assert "--cap-drop ALL" in joined and "--unshare-pid" in joined and "--die-with-parent" in joined
    assert "--unshare-net" not in joined  # agents call their model's API
    assert joined.index(f"--bind {home} {home}") < joined.index(f"--ro-bind {repo} {repo}")
    assert joined.index(f"--ro-bind {repo} {repo}") < joined.index(f"--bind {tree} {tree}")
    assert argv[-3:] == ["--", "agent", "--go"]
