"""Owner-only files and directories: what Tenure keeps on disk is readable by its user alone.

Directories Tenure creates are ``0700``, files it keeps state or secrets in ``0600``
(the SQLite store and its ``-wal``/``-shm`` files, members' epoch memory, attempt
logs and agent homes, keys). An existing install is tightened when it is opened:
group and other bits are taken away from Tenure's own files and directories (a
``.tenure`` directory and what Tenure made inside it), never from an operator's
directory that merely holds them. A path owned by another user is left as it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
STATE_DIR_NAME = ".tenure"


def tighten(path: Path, mode: int) -> None:
    """Drop the permission bits of ``path`` that ``mode`` does not grant (ours only)."""
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        return
    current = stat.S_IMODE(info.st_mode)
    if current & ~mode:
        try:
            path.chmod(current & mode)
        except OSError:
            pass  # a read-only file system, say: nothing better to do here


def private_dir(path: Path, *, tighten_existing: bool = True) -> Path:
    """``path`` as a directory, every component created here ``0700``; an existing
    ``path`` is tightened too unless ``tighten_existing`` is False (an operator's own
    directory). A ``.tenure`` directory on the way is always Tenure's: tightened."""
    missing: list[Path] = []
    walk = path
    while not walk.exists() and walk != walk.parent:
        missing.append(walk)
        walk = walk.parent
    for each in reversed(missing):
        try:
            each.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        tighten(each, DIR_MODE)  # mkdir's mode is cut by the umask, never widened by it
    if tighten_existing and not missing:
        tighten(path, DIR_MODE)
    for each in (path, *path.parents):
        if each.name == STATE_DIR_NAME:
            tighten(each, DIR_MODE)
            break
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty and ``0600`` if it is missing; tighten it if it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        tighten(path, FILE_MODE)
    else:
        os.close(fd)
    return path
