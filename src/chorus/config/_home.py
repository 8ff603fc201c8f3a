"""CHORUS_HOME and the folders under it (see DESIGN.md, "Where things live on disk")."""

from __future__ import annotations

import os
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
