"""What an agent CLI said to ``--version``, remembered per binary: asking costs a Node
start (a second or more each under load), and ``chorus agents list`` asks three.

An answer is reused only for the same file: the binary's real path (links followed),
its inode, size and modification time; reinstalling or upgrading the CLI writes a new
file, so it is asked again. A wrapper script that runs another program cannot show
that program's change, so an answer is also kept for a day at most. Only answers are
kept (a probe that failed is tried again next time). The file lives under
``CHORUS_HOME/cache`` and is written only when that home exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chorus.config import chorus_home

#: The longest an answer is reused, whatever the file says.
MAX_AGE_S = 24 * 3600.0
#: The most binaries remembered (each a line of the file).
MAX_ENTRIES = 64


def cache_path() -> Path:
    return chorus_home() / "cache" / "agent-versions.json"


def cached_version(path: Path, probe: Callable[[Path], str | None]) -> str | None:
    """``probe(path)``, or what it answered before for this very file."""
    key = _key(path)
    if key is None:
        return probe(path)
    entries = _load()
    entry = entries.get(key[0])
    if entry is not None and _fresh(entry, key[1]):
        return str(entry["version"])
    version = probe(path)
    if version is not None:
        entries[key[0]] = {"stamp": key[1], "version": version, "at": time.time()}
        _save(entries)
    return version


def _key(path: Path) -> tuple[str, list[int]] | None:
    """The binary's real path and its stamp (inode, size, mtime); None if it is gone."""
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError):
        return None
    return str(real), [st.st_ino, st.st_size, st.st_mtime_ns]


def _fresh(entry: dict[str, Any], stamp: list[int]) -> bool:
    return bool(0 <= time.time() - entry["at"] < MAX_AGE_S and entry["stamp"] == stamp)


def _load() -> dict[str, dict[str, Any]]:
    """The entries of the file that have the right shape (none if it is unreadable)."""
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if _well_formed(v)}


def _well_formed(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("at"), (int, float))
        and isinstance(entry.get("version"), str)
        and isinstance(entry.get("stamp"), list)
    )


def _save(entries: dict[str, dict[str, Any]]) -> None:
    """Write the file through a temporary one renamed over it; never creates the home."""
    home = chorus_home()
    if not home.is_dir():
        return
    newest = sorted(entries.items(), key=lambda kv: float(kv[1]["at"]))
    folder = home / "cache"
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".agent-versions.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(dict(newest[-MAX_ENTRIES:]), handle, indent=1)
            os.replace(tmp, cache_path())
        except OSError:
            os.unlink(tmp)
            raise
