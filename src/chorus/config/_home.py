"""CHORUS_HOME and the folders under it (see DESIGN.md, "Where things live on disk")."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def chorus_home() -> Path:
    """Return ``$CHORUS_HOME`` (default ``~/.chorus``). Does not create it."""
    raw = os.environ.get("CHORUS_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".chorus"


def private_home() -> Path:
    """CHORUS_HOME, created 0700, and tightened to 0700 if group or others could
    enter it (everything under it is then out of their reach, whatever its mode)."""
    home = chorus_home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if home.stat().st_mode & 0o077:
        os.chmod(home, 0o700)
    return home


def _sub(name: str) -> Path:
    path = private_home() / name
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def run_dir() -> Path:
    """``CHORUS_HOME/run``: daemon socket and pid. Created 0700 on first use."""
    return _sub("run")


def sessions_dir() -> Path:
    """``CHORUS_HOME/sessions``: one JSONL mirror per session."""
    return _sub("sessions")


#: The umask the process had before :func:`private_umask` (None: never called).
_USER_UMASK: list[int] = []


def private_umask() -> None:
    """Make everything this process creates private (umask 077), as the daemon does;
    the previous umask is kept for the bodies it starts (:func:`body_umask`)."""
    previous = os.umask(0o077)
    if not _USER_UMASK:
        _USER_UMASK.append(previous)


def body_umask() -> int:
    """The umask for an agent CLI: the user's own, so files it writes in a project are
    as the user would make them (-1, "unchanged", when :func:`private_umask` never ran)."""
    return _USER_UMASK[0] if _USER_UMASK else -1


#: Folders under CHORUS_HOME that hold the user's work (job worktrees, the routines'
#: workspace): their files keep the modes the user's tools gave them.
WORK_FOLDERS = ("worktrees", "workspace")


def tighten_home() -> int:
    """Take group and other permissions off every file and folder under CHORUS_HOME
    (the work folders excepted); returns how many were changed. Symlinks are left."""
    home = private_home()
    changed = 0
    for root, dirs, files in os.walk(home):
        if Path(root) == home:
            dirs[:] = [d for d in dirs if d not in WORK_FOLDERS]
        for name in (*dirs, *files):
            changed += _tighten(Path(root) / name)
    return changed


def _tighten(path: Path) -> int:
    try:
        info = path.lstat()
    except OSError:
        return 0
    if stat.S_ISLNK(info.st_mode) or not info.st_mode & 0o077:
        return 0
    os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
    return 1
