"""One daemon per CHORUS_HOME, even when someone deletes files under run/:
the lock is held on the home directory itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chorus.daemon import DaemonClient, stop_daemon

pytestmark = pytest.mark.faults


def test_deleting_the_lock_file_does_not_let_a_second_daemon_run(chorus_home: Path) -> None:
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\ntcp = false\n"
    )
    started = subprocess.run(
        [sys.executable, "-m", "chorus", "start"], capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    first = int((chorus_home / "run" / "daemon.pid").read_text())
    try:
        for path in (chorus_home / "run").iterdir():
            if path.name.endswith(".lock"):
                path.unlink()
        second = subprocess.run(
            [sys.executable, "-m", "chorus.daemon"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "another daemon already runs" in second.stderr
        status = DaemonClient(autostart=False).status()
        assert status["pid"] == first
        assert (chorus_home / "run" / "daemon.pid").read_text() == str(first)
    finally:
        stop_daemon()


def test_stop_runs_the_daemons_clean_up(chorus_home: Path) -> None:
    """uvicorn re-raises the SIGTERM it stopped for; the daemon's own clean-up (socket,
    pid file, bodies' process groups) must still run before it exits."""
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\ntcp = false\n"
    )
    run = chorus_home / "run"
    for command in ("start", "stop"):
        done = subprocess.run(
            [sys.executable, "-m", "chorus", command], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
    assert not (run / "chorus.sock").exists()
    assert not (run / "daemon.pid").exists()
