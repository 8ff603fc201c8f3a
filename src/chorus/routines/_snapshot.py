"""What a file-change routine's watched path looked like when Chorus last saw it, so a
change made while no daemon ran fires the routine once at the next start.

A snapshot is each watched file's modification time and size (``.git`` and editor
noise skipped, as the live watcher skips them; links never followed), kept as JSON
under ``CHORUS_HOME/run/watch/`` (the daemon's own folder: no body can write it).
It is taken when a watch starts with no snapshot yet (nothing to compare: a new
routine never fires for files that were already there) and again after every
firing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from watchfiles import Change, DefaultFilter

from chorus.config import run_dir

Snapshot = dict[str, list[int]]

#: Files recorded at most; a larger tree is compared on its first files only.
MAX_FILES = 20_000
_FILTER = DefaultFilter()


def take(path: str) -> Snapshot:
    """``{file: [mtime_ns, size]}`` for the watched file, or every file under the
    watched folder (not following links)."""
    root = Path(path)
    if not root.is_dir():
        return _entry(root)
    snap: Snapshot = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if _FILTER(Change.modified, os.path.join(folder, d))]
        for name in files:
            snap |= _entry(Path(folder) / name)
            if len(snap) >= MAX_FILES:
                return snap
    return snap


def _entry(file: Path) -> Snapshot:
    if not _FILTER(Change.modified, str(file)):
        return {}
    try:
        st = file.lstat()
    except OSError:
        return {}
    return {str(file): [st.st_mtime_ns, st.st_size]}


def changed(old: Snapshot, new: Snapshot) -> list[str]:
    """Files added, removed or modified between two snapshots, sorted."""
    return sorted(f for f in old.keys() | new.keys() if old.get(f) != new.get(f))


def _file(routine: str) -> Path:
    return run_dir() / "watch" / f"{routine}.json"


def load(routine: str, path: str) -> Snapshot | None:
    """The routine's last snapshot of ``path``, or None (never taken, unreadable, or
    taken of another path: the routine's ``watch_path`` changed since)."""
    try:
        data = json.loads(_file(routine).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("path") != path:
        return None
    files = data.get("files")
    return files if isinstance(files, dict) else None


def save(routine: str, path: str, snap: Snapshot) -> None:
    """Keep ``snap`` of ``path`` as the routine's last (written whole, then renamed)."""
    target = _file(routine)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"path": path, "files": snap}), encoding="utf-8")
    os.replace(tmp, target)
