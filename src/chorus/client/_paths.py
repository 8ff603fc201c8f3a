"""Files of the daemon under ``CHORUS_HOME/run`` (one daemon per home), and its
providers' health file (read by ``chorus status`` when no daemon runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chorus.config import chorus_home, run_dir


def socket_path() -> Path:
    return run_dir() / "chorus.sock"


def pid_path() -> Path:
    return run_dir() / "daemon.pid"


def lock_path() -> Path:
    return run_dir() / "daemon.lock"


def log_path() -> Path:
    return run_dir() / "daemon.log"


def health_path() -> Path:
    return chorus_home() / "health.json"


def load_health_file() -> list[dict[str, Any]]:
    """The providers' health as the daemon last saved it ([] when none or unreadable)."""
    try:
        data = json.loads(health_path().read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []
