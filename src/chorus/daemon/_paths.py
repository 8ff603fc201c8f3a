"""Files of the daemon under ``CHORUS_HOME/run``: one daemon per home."""

from __future__ import annotations

from pathlib import Path

from chorus.config import run_dir


def socket_path() -> Path:
    return run_dir() / "chorus.sock"


def pid_path() -> Path:
    return run_dir() / "daemon.pid"


def lock_path() -> Path:
    return run_dir() / "daemon.lock"


def log_path() -> Path:
    return run_dir() / "daemon.log"
